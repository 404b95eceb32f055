import AVGraph
import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// avgraph as an RTMP server (RTMPS with a certificate) on SwiftNIO: every connection of one
/// source on one event loop of the process's shared group, each a pipeline of its own (TLS
/// first when the URL is `rtmps://`, then `RtmpDecoder` feeding its `RtmpConnection`, then
/// `RtmpPeer`). Any number of connections go through the handshake and the publish commands at
/// once; one that has not published with a valid key within `handshakeTimeout` is dropped, and
/// when too many wait, the longest-waiting makes room for a newcomer (`WaitingRoom`). Only
/// an admitted publisher becomes a session, handed to the reader as a `PublisherStream` of FLV,
/// and its socket is read only while that stream has room: TCP holds the rest at the publisher.
/// While one publishes, another valid publisher is refused (the held session ends after
/// `silence` without data, so a phone that reconnects gets in then). Refusals are warnings
/// naming the peer, never the key.
// @unchecked: a subclass (see PublisherHandoff); `server` is set once, in init; the lobby is its loop's alone.
package final class RtmpListener: PublisherHandoff, @unchecked Sendable {
    package struct Limits {
        package var handshakeTimeout = 5.0
        /// An admitted publisher that sends nothing this long is gone.
        package var silence = 5.0
        /// Connections that have not published yet: when a limit is reached, the longest-waiting
        /// one goes for the newcomer (see `WaitingRoom`).
        package var waiting = WaitingRoom<ObjectIdentifier>.Limits()
        /// A publisher that asked to stop gets this long to close first (then it is closed).
        package var leaving = 3.0
        /// Any number of publishers at once (`avgraph serve`), each its own stream.
        package var concurrent = false

        package init(handshakeTimeout: Double = 5.0, silence: Double = 5.0, waiting: WaitingRoom<ObjectIdentifier>.Limits = .init(),
                     leaving: Double = 3.0, concurrent: Bool = false) {
            self.handshakeTimeout = handshakeTimeout
            self.silence = silence
            self.waiting = waiting
            self.leaving = leaving
            self.concurrent = concurrent
        }
    }

    /// PEM files of an `rtmps://` listener.
    package struct TLSFiles {
        package var certificate: String
        package var key: String

        package init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }

    package let policy: RtmpPolicy
    package let limits: Limits
    private let loop: EventLoop
    private let lobby: NIOLoopBoundBox<Lobby>
    private let tls: NIOSSLContext?
    /// Bound in init, once (a port in use is an error at start, not a warning later); it accepts only
    /// from `start()`. Closed at `stop()`: a stopped source frees its port at once, so a run (or
    /// a test) can listen on it again straight away.
    private var server: Channel?

    package init(host: String, port: Int, policy: RtmpPolicy, limits: Limits, tls files: TLSFiles? = nil) throws {
        self.policy = policy
        self.limits = limits
        if let files {
            do { tls = try ListenTLS.checkedContext(certificate: files.certificate, key: files.key) } catch { throw MediaError(error.description) }
        } else {
            tls = nil
        }
        loop = MultiThreadedEventLoopGroup.singleton.next()
        lobby = NIOLoopBoundBox.makeBoxSendingValue(Lobby(limits: limits.waiting), as: Lobby.self, eventLoop: loop)
        super.init()
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        // One loop for the server and its connections: the lobby (who waits, who publishes) is
        // that loop's alone, as the poll(2) thread's was.
        let bootstrap = ServerBootstrap(group: loop)
            // A burst of connections (a scan, many phones back at once) waits in the kernel's queue, not in SYN retries.
            .serverChannelOption(ChannelOptions.backlog, value: 1024)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(ChannelOptions.autoRead, value: false)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            // Each connection reads only when its peer handler asks: back-pressure is reading less.
            .childChannelOption(ChannelOptions.autoRead, value: false)
            .childChannelInitializer { [weak self] channel in
                guard let self else { return channel.close() }
                return channel.eventLoop.makeCompletedFuture { try self.admit(channel) }
            }
        do { server = try bootstrap.bind(host: bare.isEmpty ? "0.0.0.0" : bare, port: port).wait() } catch {
            let why = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            throw MediaError("cannot listen on \(host):\(port): \(why)")
        }
    }

    deinit {
        // Never started or stopped (a run that failed before its start): the port is freed all the same.
        if !isStopped { server?.close(promise: nil) }
    }

    package override func start() {
        server?.setOption(ChannelOptions.autoRead, value: true).whenFailure { [weak self] error in
            self?.note("the RTMP listener cannot accept connections: \(error)")
        }
    }

    package override func stop() {
        guard markStopped() else { return }
        let closed = server?.close() ?? loop.makeSucceededVoidFuture()
        let dropped = loop.flatSubmit { [lobby, loop] in
            lobby.value.closing = true
            return EventLoopFuture.andAllComplete(lobby.value.peers.compactMap { $0.drop() }, on: loop)
        }
        // Waiting on the loop itself would never end.
        if !loop.inEventLoop { _ = try? closed.and(dropped).wait() }
    }

    /// A new connection's pipeline; on the loop.
    private func admit(_ channel: Channel) throws {
        let connection = RtmpConnection(policy: policy)
        let reads = SocketReads()
        let lobby = lobby.value
        let peer = RtmpPeer(listener: self, lobby: lobby, connection: connection, reads: reads, address: Self.describe(channel.remoteAddress))
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(reads)
        if let tls { try pipeline.addHandler(NIOSSLServerHandler(context: tls)) }
        let single = !limits.concurrent
        try pipeline.addHandler(ByteToMessageHandler(RtmpDecoder(connection: connection) { single && lobby.isPublishing(besides: peer) }))
        try pipeline.addHandler(peer)
    }

    /// `HOST:PORT` (`[HOST]:PORT` for IPv6), numeric.
    package static func describe(_ address: NIOCore.SocketAddress?) -> String {
        guard let address, let ip = address.ipAddress, let port = address.port else { return "unknown" }
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }
}

/// The connections of one listener, on its loop.
private final class Lobby {
    var peers: [RtmpPeer] = []
    /// Those that have not published yet.
    var room: WaitingRoom<ObjectIdentifier>
    var notes = NoteThrottle()
    /// The listener is stopping: connections closing now are not the peers' doing.
    var closing = false

    init(limits: WaitingRoom<ObjectIdentifier>.Limits) { room = WaitingRoom(limits: limits) }

    func isPublishing(besides peer: RtmpPeer) -> Bool { peers.contains { $0 !== peer && $0.isPublishing } }

    /// Takes a new connection in; the waiting ones it displaces are closed.
    func enter(_ peer: RtmpPeer, listener: RtmpListener) {
        peers.append(peer)
        let displaced = room.enter(ObjectIdentifier(peer), address: peer.address)
        for id in displaced {
            guard let victim = peers.first(where: { ObjectIdentifier($0) == id }) else { continue }
            if let more = notes.pass("displaced") {
                listener.note(room.displacedNote(victim.address, waiting: "connections wait to publish") + NoteThrottle.suffix(more))
            }
            victim.drop()
        }
    }

    func leave(_ peer: RtmpPeer) {
        room.leave(ObjectIdentifier(peer))
        peers.removeAll { $0 === peer }
    }
}

/// First in a connection's pipeline, on the socket's own bytes: whether the last read left the
/// socket empty (NIO stops reading a socket at a read that does not fill its buffer), and the
/// first byte the peer sent.
private final class SocketReads: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private(set) var drained = true
    private(set) var first: UInt8?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        drained = bytes.writableBytes > 0
        if first == nil { first = bytes.getInteger(at: bytes.readerIndex) }
        context.fireChannelRead(data)
    }
}

/// A connection's bytes through its `RtmpConnection` (handshake, chunk stream, commands, FLV):
/// each read is handed over whole (the connection keeps what a message still lacks), and the
/// connection, fed, goes on to `RtmpPeer`.
private struct RtmpDecoder: ByteToMessageDecoder {
    typealias InboundOut = RtmpConnection

    let connection: RtmpConnection
    /// Whether another connection publishes now (asked before each read: a publish is refused then).
    let othersPublishing: () -> Bool

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) -> DecodingState {
        guard buffer.readableBytes > 0 else { return .needMoreData }
        connection.othersPublishing = othersPublishing()
        buffer.withUnsafeReadableBytes { connection.receive($0) }
        buffer.moveReaderIndex(to: buffer.writerIndex)
        context.fireChannelRead(wrapInboundOut(connection))
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) -> DecodingState {
        decode(context: context, buffer: &buffer)
    }
}

/// One connection after its decoder: sends what the connection answers, hands an admitted
/// publisher's FLV to its `PublisherStream`, reads only while that stream has room, and keeps
/// its deadlines (the handshake, the publisher's silence, the close after a stop).
private final class RtmpPeer: ChannelInboundHandler {
    typealias InboundIn = RtmpConnection
    typealias OutboundOut = ByteBuffer

    /// From the reader's side of the stream: it took from a full stream, or gave it up.
    struct Room: Sendable {}

    let address: String
    private let listener: RtmpListener
    private let lobby: Lobby
    private let connection: RtmpConnection
    private let reads: SocketReads
    private var context: ChannelHandlerContext?
    private(set) var stream: PublisherStream?
    private var announced = false
    private var sentSomething = false
    private var lastData = NIODeadline.now()
    /// Not reading: the reader's stream is full.
    private var held = false
    /// The publisher asked to stop: it is answered and closes first.
    private var leaving = false
    /// Closed by the listener: nothing more to say about it.
    private var dropped = false
    private var timer: Scheduled<Void>?
    private var closed: EventLoopFuture<Void>?

    init(listener: RtmpListener, lobby: Lobby, connection: RtmpConnection, reads: SocketReads, address: String) {
        self.listener = listener
        self.lobby = lobby
        self.connection = connection
        self.reads = reads
        self.address = address
    }

    /// Admitted, and not on its way out.
    var isPublishing: Bool { stream != nil && !leaving }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        closed = context.channel.closeFuture
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        lobby.enter(self, listener: listener)
        timer = after(listener.limits.handshakeTimeout) { [self] in
            if let more = lobby.notes.pass("timeout") {
                listener.note("\(address): refused: handshake timed out (\(RtmpListener.seconds(listener.limits.handshakeTimeout)) without a publish with a valid key)"
                    + NoteThrottle.suffix(more))
            }
            drop()
        }
        context.read()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !dropped else { return }
        let c = unwrapInboundIn(data)
        if !sentSomething { lobby.room.spoke(ObjectIdentifier(self)) }
        sentSomething = true
        lastData = .now()
        send()
        if c.admitted, stream == nil { begin(context.channel, key: c.streamName, app: c.app) }
        if let s = stream, !c.flv.isEmpty {
            s.append(c.flv)
            c.flv = []
        }
        if c.ready, !announced, let s = stream, c.refusal == nil {
            announced = true
            listener.announce(s)
        }
        if let refusal = c.refusal {
            listener.note("\(address): \(refusal)")
            drop()
        } else if c.finished && !leaving {
            leave()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard !dropped else { return }
        if !leaving && stream?.isFull == true {
            // Not read until the reader takes: TCP holds the rest at the publisher.
            held = true
            return
        }
        // Acknowledged only once the socket is read empty (RtmpConnection.acknowledgeIfDue).
        if reads.drained {
            connection.acknowledgeIfDue()
            send()
        }
        context.read()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is Room {
            guard !dropped, let s = stream else { return }
            if s.isAbandoned && !leaving {
                drop()
            } else if held && !s.isFull {
                held = false
                // Its silence while it was not read was the reader's, not the publisher's.
                lastData = .now()
                context.read()
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if case .handshakeFailed? = error as? NIOSSLError, !dropped, let first = reads.first {
            // Whatever a client that does not speak TLS sent was taken for a TLS record.
            listener.note("\(address): refused: " + (first == 3 ? "not TLS (an rtmp:// client at an rtmps:// port)" : "the TLS handshake failed (\(error))"))
            dropped = true
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !dropped && !lobby.closing && stream == nil && sentSomething {
            listener.note("\(address): refused: not RTMP (left during the handshake)")
        }
        stream?.end()
        timer?.cancel()
        lobby.leave(self)
        context.fireChannelInactive()
    }

    /// Closes the connection (after what is still to send); the reader gets what the stream
    /// holds, then its end. The future: closed.
    @discardableResult
    func drop() -> EventLoopFuture<Void>? {
        if !dropped, let context {
            dropped = true
            send()
            stream?.end()
            timer?.cancel()
            context.close(promise: nil)
        }
        return closed
    }

    /// Admitted: the stream the reader will get, and the publisher's silence watched from now.
    private func begin(_ channel: Channel, key: String, app: String) {
        stream = PublisherStream(peer: address, key: key, app: app, format: "flv") { channel.pipeline.fireUserInboundEventTriggered(Room()) }
        lobby.room.leave(ObjectIdentifier(self))
        timer?.cancel()
        watchSilence()
    }

    private func watchSilence() {
        timer = after(deadline: lastData + seconds(listener.limits.silence)) { [self] in
            if held { lastData = .now() }
            if NIODeadline.now() - lastData >= seconds(listener.limits.silence) {
                listener.note("\(address): the publisher sent nothing for \(RtmpListener.seconds(listener.limits.silence)): taken as gone")
                drop()
            } else {
                watchSilence()
            }
        }
    }

    /// The publisher asked to stop: the answer goes out, everything it sent goes on to the
    /// reader, and it gets `leaving` seconds to close first, as nginx-rtmp lets it.
    private func leave() {
        leaving = true
        send()
        stream?.end()
        timer?.cancel()
        timer = after(listener.limits.leaving) { [self] in drop() }
    }

    /// What the connection has to send to the peer.
    private func send() {
        guard let context, !connection.output.isEmpty else { return }
        let bytes = context.channel.allocator.buffer(bytes: connection.output)
        connection.output.removeAll(keepingCapacity: true)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

    private func after(_ delay: Double, _ task: @escaping () -> Void) -> Scheduled<Void>? {
        after(deadline: .now() + seconds(delay), task)
    }

    private func after(deadline: NIODeadline, _ task: @escaping () -> Void) -> Scheduled<Void>? {
        context?.eventLoop.assumeIsolated().scheduleTask(deadline: deadline, task)
    }

    private func seconds(_ s: Double) -> TimeAmount { .nanoseconds(Int64(s * 1e9)) }
}
