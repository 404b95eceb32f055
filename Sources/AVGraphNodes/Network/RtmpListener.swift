import AVGraph
import Foundation

/// avgraph as an RTMP server: one thread that accepts any number of connections at once and
/// takes each through the handshake and the publish commands (`RtmpConnection`), all on one
/// poll(2) woken by a stop pipe. A connection that has not published with a valid key within
/// `handshakeTimeout` is dropped; only an admitted publisher becomes a session, handed to the
/// reader as a `PublisherStream` of FLV. While one publishes, another valid publisher is
/// refused (the held session ends after `silence` without data, so a phone that reconnects
/// gets in then). Refusals are warnings naming the peer, never the key.
final class RtmpListener: PublisherListener, @unchecked Sendable {
    struct Limits {
        var handshakeTimeout = 5.0
        /// An admitted publisher that sends nothing this long is gone.
        var silence = 5.0
        /// Connections that have not published yet, at most; more are closed at once.
        var pending = 64
    }

    private final class Peer {
        let fd: Int32
        let address: String
        let connection: RtmpConnection
        let deadline: Double
        var lastData: Double
        var sentSomething = false
        var stream: PublisherStream?
        var announced = false
        init(fd: Int32, address: String, connection: RtmpConnection, now: Double, timeout: Double) {
            self.fd = fd
            self.address = address
            self.connection = connection
            deadline = now + timeout
            lastData = now
        }
    }

    let policy: RtmpPolicy
    let limits: Limits
    /// Closed when the accept loop ends, not at deinit: a stopped source frees its port at once,
    /// so a run (or a test) can listen on it again straight away.
    private var listener: Int32
    private var peers: [Peer] = []
    private var lastCrowdWarning = 0.0

    /// Binds at once (a port in use is an error at start, not a warning later).
    init(host: String, port: Int, policy: RtmpPolicy, limits: Limits) throws {
        self.policy = policy
        self.limits = limits
        let fd = try SocketAddress.listen(host: host, port: port)
        listener = fd
        do { try super.init(threadName: "rtmp-listener") } catch {
            close(fd)
            throw error
        }
    }

    deinit {
        stop()
        if listener >= 0 { close(listener) }
    }

    override func run() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        defer {
            for p in peers { drop(p) }
            close(listener)
            listener = -1
        }
        while !isStopped {
            let now = Monotonic.now
            var fds = [pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0), pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            var nearest = Double.infinity
            for p in peers {
                var events: Int16 = 0
                if p.stream?.isFull == true {
                    // Not read because the reader is behind: its silence is ours, not the publisher's.
                    p.lastData = now
                } else {
                    events |= Int16(POLLIN)
                }
                if !p.connection.output.isEmpty { events |= Int16(POLLOUT) }
                fds.append(pollfd(fd: p.fd, events: events, revents: 0))
                nearest = min(nearest, p.stream == nil ? p.deadline : p.lastData + limits.silence)
            }
            let wait = nearest.isFinite ? Int32(max(0, min(60, nearest - now)) * 1000) + 1 : -1
            guard poll(&fds, nfds_t(fds.count), wait) >= 0 || errno == EINTR else { return }
            if fds[0].revents != 0 { drainWake() }
            if isStopped { return }
            if fds[1].revents & Int16(POLLIN) != 0 { acceptAll() }
            var gone: Set<ObjectIdentifier> = []
            for (i, p) in peers.enumerated() where i + 2 < fds.count {
                let events = fds[i + 2].revents
                if events & Int16(POLLOUT) != 0 { flush(p) }
                guard events & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { Glibc.read(p.fd, $0.baseAddress, $0.count) }
                if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
                if n <= 0 {
                    closed(p)
                    gone.insert(ObjectIdentifier(p))
                    continue
                }
                p.sentSomething = true
                p.lastData = Monotonic.now
                if !received(p, buffer.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[0..<n]) }) { gone.insert(ObjectIdentifier(p)) }
            }
            let later = Monotonic.now
            for p in peers where !gone.contains(ObjectIdentifier(p)) {
                if p.stream?.isAbandoned == true {
                    drop(p)
                } else if p.stream == nil && later >= p.deadline {
                    note("\(p.address): refused: handshake timed out (\(Self.seconds(limits.handshakeTimeout)) without a publish with a valid key)")
                    drop(p)
                } else if p.stream != nil && later - p.lastData >= limits.silence {
                    note("\(p.address): the publisher sent nothing for \(Self.seconds(limits.silence)): taken as gone")
                    drop(p)
                } else { continue }
                gone.insert(ObjectIdentifier(p))
            }
            peers.removeAll { gone.contains(ObjectIdentifier($0)) }
        }
    }

    private func acceptAll() {
        while let (fd, address) = SocketAddress.accept(listener) {
            let waiting = peers.filter { $0.stream == nil }.count
            if waiting >= limits.pending {
                close(fd)
                if Monotonic.now - lastCrowdWarning > 1 {
                    lastCrowdWarning = Monotonic.now
                    note("\(address): refused: \(limits.pending) connections are already waiting to publish")
                }
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            peers.append(Peer(fd: fd, address: address, connection: RtmpConnection(policy: policy), now: Monotonic.now, timeout: limits.handshakeTimeout))
        }
    }

    /// Feeds a connection; false when it is to be closed (refused, or the publisher finished).
    private func received(_ p: Peer, _ bytes: UnsafeRawBufferPointer) -> Bool {
        let c = p.connection
        c.othersPublishing = peers.contains { $0 !== p && $0.stream != nil }
        c.receive(bytes)
        var unread: Int32 = 0
        if ioctl(p.fd, UInt(FIONREAD), &unread) == 0 && unread == 0 && p.stream?.isFull != true { c.acknowledgeIfDue() }
        flush(p)
        if c.admitted, p.stream == nil {
            p.stream = PublisherStream(peer: p.address) { [weak self] in self?.poke() }
        }
        if let s = p.stream, !c.flv.isEmpty {
            s.append(c.flv)
            c.flv = []
        }
        if c.ready, !p.announced, let s = p.stream, c.refusal == nil {
            p.announced = true
            announce(s)
        }
        if let refusal = c.refusal {
            note("\(p.address): \(refusal)")
            drop(p)
            return false
        }
        if c.finished {
            drop(p)
            return false
        }
        return true
    }

    /// The peer hung up.
    private func closed(_ p: Peer) {
        if p.stream == nil && p.sentSomething {
            note("\(p.address): refused: not RTMP (left during the handshake)")
        }
        drop(p)
    }

    private func flush(_ p: Peer) {
        let c = p.connection
        guard !c.output.isEmpty else { return }
        let n = c.output.withUnsafeBytes { send(p.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        if n > 0 { c.output.removeFirst(n) }
    }

    private func drop(_ p: Peer) {
        flush(p)
        p.stream?.end()
        shutdown(p.fd, Int32(SHUT_RDWR))
        close(p.fd)
    }
}
