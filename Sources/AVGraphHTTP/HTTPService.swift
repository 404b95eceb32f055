import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// What a server does with each connection: the channel pipeline (TLS, NIOHTTP1's decoder and
/// encoder, our handler), the rules a request passes before its route (its `Host`, its `Origin`,
/// its size) and the routes. The server and the HTTP fuzz target build connections with it alike.
public final class HTTPService: Sendable {
    public struct Limits: Sendable {
        /// Open connections; past it the longest waiting is closed for the newcomer.
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

    /// Sets up a new connection's pipeline, on its event loop.
    package func configure(_ channel: any Channel) throws {
        let pipeline = channel.pipeline.syncOperations
        guard connections.admit(channel) else {
            try pipeline.addHandler(HTTPRefusal(plain: tls == nil))
            return
        }
        channel.closeFuture.whenComplete { [connections] _ in connections.remove(channel) }
        if let tls { try pipeline.addHandler(NIOSSLServerHandler(context: tls)) }
        var decoderLimits = NIOHTTPDecoderLimitConfiguration()
        decoderLimits.maxHeaderFieldSize = limits.header
        decoderLimits.maxHeaderListSize = limits.header
        decoderLimits.maxHeaderFieldCount = 100
        try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true,
                                                 withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
        try pipeline.addHandler(HTTPConnectionHandler(service: self))
    }

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
