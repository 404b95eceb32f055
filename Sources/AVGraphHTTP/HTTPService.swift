import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// What a server does with each connection: the channel pipeline (TLS, NIOHTTP1's decoder and
/// encoder or NIOHTTP2's streams, our handler), the rules a request passes before its route (its `Host`, its `Origin`,
/// its size) and the routes. The server and the HTTP fuzz target build connections with it alike.
public final class HTTPService: Sendable {
    public struct Limits: Sendable {
        /// Open (TCP) connections; past it the longest waiting is closed for the newcomer.
        public var connections = 64
        /// From a connection's start (TLS handshake included) to the end of its first request;
        /// from a request's head to its end.
        public var request: TimeAmount = .seconds(10)
        /// Between the end of an answer and the next request's head on a kept-alive connection.
        public var idle: TimeAmount = .seconds(5)
        public var header = 16 * 1024
        public var body = 64 * 1024
        public init() {}
    }

    let names: HTTPNames
    let tls: NIOSSLContext?
    let limits: Limits
    let routes: @Sendable (HTTPRequest) -> HTTPResponse
    /// Where routes run, off the event loop (a route may wait, e.g. a `set` for its node); nil
    /// runs them in place (the fuzz target's single thread).
    let pool: NIOThreadPool?
    let connections: HTTPConnections

    var scheme: String { tls == nil ? "http" : "https" }

    /// Routes run on a pool of 4 threads of the process, shared by its servers.
    public convenience init(names: HTTPNames, tls: NIOSSLContext? = nil, limits: Limits = .init(),
                            routes: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.init(names: names, tls: tls, limits: limits, pool: Self.routePool, routes: routes)
    }

    package init(names: HTTPNames, tls: NIOSSLContext?, limits: Limits, pool: NIOThreadPool?,
                 routes: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
        self.names = names
        self.tls = tls
        self.limits = limits
        self.pool = pool
        self.routes = routes
        connections = HTTPConnections(limit: limits.connections)
    }

    private static let routePool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 4)
        pool.start()
        return pool
    }()

    /// Sets up a new connection's pipeline, on its event loop: HTTP/1.1, or over TLS whichever of
    /// HTTP/2 and HTTP/1.1 the client chose in the handshake (ALPN; none chosen is HTTP/1.1).
    package func configure(_ channel: any Channel) throws {
        let pipeline = channel.pipeline.syncOperations
        guard connections.admit(channel) else {
            try pipeline.addHandler(HTTPRefusal(plain: tls == nil))
            return
        }
        channel.closeFuture.whenComplete { [connections] _ in connections.remove(channel) }
        // The loop's clock: an embedded loop (the fuzz target's) keeps a time of its own.
        let firstRequestBy = channel.eventLoop.now + limits.request
        guard let tls else {
            try configureHTTP1(channel, firstRequestBy: firstRequestBy)
            return
        }
        try pipeline.addHandler(NIOSSLServerHandler(context: tls))
        // The handshake counts against the first request's time: a client that never finishes it is closed.
        let handshake = channel.eventLoop.scheduleTask(deadline: firstRequestBy) { channel.close(promise: nil) }
        try pipeline.addHandler(ApplicationProtocolNegotiationHandler { [self] result, channel in
            handshake.cancel()
            return channel.eventLoop.makeCompletedFuture {
                if case .negotiated("h2") = result {
                    try configureHTTP2(channel, firstRequestBy: firstRequestBy)
                } else {
                    try configureHTTP1(channel, firstRequestBy: firstRequestBy)
                }
            }
        })
    }

    private func configureHTTP1(_ channel: any Channel, firstRequestBy: NIODeadline) throws {
        var decoderLimits = NIOHTTPDecoderLimitConfiguration()
        decoderLimits.maxHeaderFieldSize = limits.header
        decoderLimits.maxHeaderListSize = limits.header
        decoderLimits.maxHeaderFieldCount = 100
        let pipeline = channel.pipeline.syncOperations
        try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true,
                                                 withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
        try pipeline.addHandler(HTTPConnectionHandler(service: self, connection: channel, firstRequestBy: firstRequestBy))
    }

    /// Each stream a channel of its own, turned into HTTP/1 parts for the same handler and rules
    /// as HTTP/1.1's; the connection (one place in `connections`) closes when it has had no
    /// stream for `limits.idle`.
    private func configureHTTP2(_ channel: any Channel, firstRequestBy: NIODeadline) throws {
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: Self.streamsPerConnection),
            HTTP2Setting(parameter: .maxHeaderListSize, value: limits.header),
        ]
        let pipeline = channel.pipeline.syncOperations
        let deadline = HTTP2ConnectionDeadline(connection: channel, firstRequestBy: firstRequestBy, idle: limits.idle)
        _ = try pipeline.configureHTTP2Pipeline(mode: .server, connectionConfiguration: connection, streamConfiguration: .init(),
                                                streamDelegate: deadline) { stream in
            stream.eventLoop.makeCompletedFuture {
                let streamPipeline = stream.pipeline.syncOperations
                try streamPipeline.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                try streamPipeline.addHandler(HTTPConnectionHandler(service: self, connection: channel, firstRequestBy: stream.eventLoop.now + self.limits.request))
            }
        }
    }

    /// Streams one HTTP/2 connection may have open at once: a player holds a few (a blocked
    /// playlist reload, a part, a segment); more wait for a free one on the client's side.
    static let streamsPerConnection = 256

    /// Why a complete request is answered without its route: a name this server does not
    /// answer to, a command from another origin, a body over the limit.
    func refusal(_ head: HTTPRequestHead, oversized: Bool) -> HTTPResponse? {
        let hosts = head.headers["host"]
        if hosts.count > 1 { return .text(400, "400: more than one Host header\n") }
        if let host = hosts.first {
            guard names.answers(host: host) else {
                return .text(421, "421: not served under this name; a name for it is given to the run with --http-host\n")
            }
        } else if head.version.major > 1 || head.version.minor >= 1 {
            return .text(400, "400: an HTTP/1.1 request needs a Host header\n")
        }
        // A browser says where a request comes from; a command must come from this server's own page.
        // WHEP's resources are the exception: a viewer's bearer token is no ambient authority, and players live on other origins.
        if head.method != .GET && head.method != .HEAD, !Self.isWhepResource(head.uri), let origin = head.headers.first(name: "origin"),
           !HTTPNames.sameOrigin(origin, host: hosts.first ?? "", scheme: scheme) {
            return .text(403, "403: a command from a page of another origin is refused\n")
        }
        if oversized { return .text(413, "413: the body is over \(limits.body / 1024) KB\n") }
        return nil
    }
}

extension HTTPService {
    /// A WHEP resource, `/whep/NODE` or `/whep/NODE/session/ID` (a query after it): what a player on
    /// another origin may POST, PATCH and DELETE. Exactly that shape: no empty, `.` or `..` segment,
    /// so no other route is reached by a path that starts like one.
    package static func isWhepResource(_ uri: String) -> Bool {
        let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3 || (parts.count == 5 && parts[3] == "session"), parts[0].isEmpty, parts[1] == "whep" else { return false }
        return parts.dropFirst(2).allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." && !$0.contains("%") }
    }
}

/// What a connection over the limit gets when nobody waiting can make room: a plain 503 (over
/// TLS, no words: the handshake has not happened) and the end.
private final class HTTPRefusal: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let plain: Bool

    init(plain: Bool) { self.plain = plain }

    func channelActive(context: ChannelHandlerContext) {
        guard plain else { context.close(promise: nil); return }
        let text = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 22\r\nConnection: close\r\n\r\n503: too many clients\n"
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(string: text))).whenComplete { _ in channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

/// An HTTP/2 connection's own deadlines (its streams keep theirs): a first stream by the first
/// request's deadline, and another within `idle` of the last one closing. NIOHTTP2 tells a
/// delegate of its streams (its inline multiplexer passes no stream events down the pipeline);
/// it calls it on the connection's event loop, where the state is kept.
private final class HTTP2ConnectionDeadline: NIOHTTP2StreamDelegate {
    private struct State {
        var openStreams = 0
        var deadline: Scheduled<Void>?
    }

    private let connection: any Channel
    private let idle: TimeAmount
    private let state: NIOLoopBoundBox<State>

    /// On the connection's event loop.
    init(connection: any Channel, firstRequestBy: NIODeadline, idle: TimeAmount) {
        self.connection = connection
        self.idle = idle
        state = NIOLoopBoundBox(State(), eventLoop: connection.eventLoop)
        arm(firstRequestBy)
        connection.closeFuture.whenComplete { [state] _ in state.value.deadline?.cancel() }
    }

    func streamCreated(_ id: HTTP2StreamID, channel: any Channel) {
        state.value.openStreams += 1
        state.value.deadline?.cancel()
    }

    func streamClosed(_ id: HTTP2StreamID, channel: any Channel) {
        state.value.openStreams = max(0, state.value.openStreams - 1)
        if state.value.openStreams == 0 { arm(connection.eventLoop.now + idle) }
    }

    private func arm(_ by: NIODeadline) {
        state.value.deadline?.cancel()
        state.value.deadline = connection.eventLoop.scheduleTask(deadline: by) { [connection] in connection.close(promise: nil) }
    }
}
