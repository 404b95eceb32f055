import AVGraph
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// An `RtmpPublishSession` on a socket, for one thread that may block (a live sink's sender):
/// the socket is opened by `TcpConnector` and handed to SwiftNIO (TLS first for `rtmps://`),
/// which reads and writes it on an event loop of the process's shared group. The sender hands
/// a message over only once everything before it has gone into the socket (as a blocking
/// write did): what waits beyond the kernel's 32 kB unsent (`TCP_NOTSENT_LOWAT`) and one
/// message waits in the sink's queue, where it is measured for the adaptive bitrate and its
/// drop policy reaches it. A cancel ends any wait within 100 ms; a server that takes nothing
/// (not a byte of the message into the socket) for `timeout` seconds ends the session with an error.
package final class RtmpClient: Sendable {
    package struct Options: Sendable {
        package var timeout: Double
        /// PEM certificates trusted for `rtmps://` instead of the system's store (a server with a
        /// self-signed certificate); nil: the system's.
        package var trustedCertificates: String?
        /// The socket's send buffer (the kernel doubles it): small, so a congested link's
        /// backlog waits where it is measured and dropped by policy, not in the kernel.
        package var sendBuffer: Int32 = 65536

        package init(timeout: Double, trustedCertificates: String? = nil, sendBuffer: Int32 = 65536) {
            self.timeout = timeout
            self.trustedCertificates = trustedCertificates
            self.sendBuffer = sendBuffer
        }
    }

    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package struct State {
        package var session: RtmpPublishSession
        /// Why the connection ended, once it has (the server closed it, TLS failed...).
        package var ended: String?
        /// Bytes handed to the channel, and of those written to the socket.
        package var handed = 0
        package var written = 0
    }

    /// Writes are handed to NIO in pieces of this size: each one written is progress, so a big
    /// keyframe on a narrow uplink is not taken for a server gone silent.
    package static let piece = 16 * 1024

    package let shared: ConditionLock<State>
    private let channel: Channel
    /// Another descriptor of the socket, for TCP_INFO: valid until `close`, whatever NIO closes.
    package let probe: Int32
    private let options: Options
    private let cancel: CancelFlag
    /// `close` runs once: the probe descriptor must not be closed twice (by then its number may be another socket's).
    private let closed = Mutex(false)

    /// Connects, handshakes and publishes to `address`: returns once the server said
    /// `NetStream.Publish.Start`; throws the server's reason when it refuses.
    package init(_ address: RtmpAddress, options: Options, cancel: CancelFlag) throws {
        self.options = options
        self.cancel = cancel
        let tls: NIOSSLContext?
        if address.tls {
            var configuration = TLSConfiguration.makeClientConfiguration()
            if let path = options.trustedCertificates {
                let certificates: [NIOSSLCertificate]
                do { certificates = try NIOSSLCertificate.fromPEMFile(path) } catch {
                    throw Failure(description: "cannot read trusted certificates from \(path): \(error)")
                }
                configuration.trustRoots = .certificates(certificates)
            }
            tls = try NIOSSLContext(configuration: configuration)
        } else {
            tls = nil
        }
        let fd: Int32
        do { fd = try TcpConnector.connect(host: address.host, port: address.port, timeout: options.timeout,
                                           sendBuffer: options.sendBuffer, cancel: cancel) } catch { throw Failure(description: error.description) }
        probe = dup(fd)
        let shared = ConditionLock(State(session: RtmpPublishSession(address: address)))
        self.shared = shared
        // SNI takes a name, never an address: an IP is checked against the certificate's addresses.
        var v4 = in_addr(), v6 = in6_addr()
        let isAddress = inet_pton(AF_INET, address.host, &v4) == 1 || inet_pton(AF_INET6, address.host, &v6) == 1
        let hostname = isAddress ? nil : address.host
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: hostname)) }
                    try channel.pipeline.syncOperations.addHandler(RtmpClientHandler(shared))
                }
            }
        do { channel = try bootstrap.withConnectedSocket(fd).wait() } catch {
            Glibc.close(probe)
            throw Failure(description: "\(error)")
        }
        do {
            try wait("publishing") { $0.session.phase == .publishing }
        } catch {
            close()
            throw error
        }
    }

    /// Whether the server takes `fourCC` as Enhanced RTMP video (its connect result).
    package func serverTakes(_ fourCC: String) -> Bool { shared.withLock { $0.session.serverTakes(fourCC) } }

    /// Waits until `ready` holds, in 100 ms slices (a cancel), at most `timeout` seconds without
    /// progress (bytes written to the socket).
    private func wait(_ what: String, _ ready: @Sendable (inout State) -> Bool) throws {
        try wait(what, endedIsFine: false, ready)
    }

    /// `endedIsFine`: `ready` is asked first, so a server that hangs up once it has everything is no failure.
    private func wait(_ what: String, endedIsFine: Bool, _ ready: @Sendable (inout State) -> Bool) throws {
        var deadline = Monotonic.now + options.timeout
        let (cancel, timeout) = (cancel, options.timeout)
        var progress = shared.withLock { $0.written }
        while true {
            let done = try shared.wait(until: min(deadline, Monotonic.now + 0.1)) { s -> Bool? in
                if s.written != progress {
                    progress = s.written
                    deadline = Monotonic.now + timeout
                }
                if endedIsFine && ready(&s) { return true }
                if let failure = s.session.failure { throw Failure(description: failure.description) }
                if let ended = s.ended { throw Failure(description: ended) }
                return ready(&s) ? true : nil
            }
            if done == true { return }
            if cancel.isCancelled { throw Failure(description: "cancelled") }
            if Monotonic.now >= deadline {
                throw Failure(description: what == "sending" ? "the server took nothing for \(Int(timeout)) s"
                                                             : "the server answered nothing for \(Int(timeout)) s (while \(what))")
            }
        }
    }

    /// Sends an audio (8), video (9) or data (18) message; blocks until what was sent before it
    /// has gone into the socket.
    package func send(type: UInt8, timestamp: UInt32, payload: [UInt8]) throws {
        try wait("sending") { $0.session.output.isEmpty && $0.written >= $0.handed }
        shared.withLock { $0.session.send(type: type, timestamp: timestamp, payload: payload) }
        flushSoon()
    }

    /// Hands what the session has to send to the channel, on its loop (where the reads' answers
    /// go too: the bytes leave in the order the session made them).
    private func flushSoon() {
        let (channel, shared) = (channel, shared)
        channel.eventLoop.execute { RtmpClientHandler.flush(channel, shared) }
    }

    /// Ends the publish (FCUnpublish, deleteStream), waits until everything sent has left, hangs up.
    package func finish() throws {
        shared.withLock { $0.session.unpublish() }
        flushSoon()
        defer { close() }
        try wait("ending", endedIsFine: true) { $0.session.output.isEmpty && $0.written >= $0.handed }
    }

    /// Hangs up at once. The probe descriptor closes here: the caller has stopped reading it.
    package func close() {
        guard closed.withLock({ c in defer { c = true }; return !c }) else { return }
        channel.close(promise: nil)
        Glibc.close(probe)
    }
}
