import NIOCore
import NIOHTTP1

/// One connection's requests (or one HTTP/2 stream's, after NIOHTTP2's codec turned its frames
/// into HTTP/1 parts), after NIOHTTP1's decoder (which, with its pipelining helper, hands them
/// over one at a time): each checked by the service's rules, then answered by its route off the
/// event loop, the answer written back on it. Keeps the deadlines: the first request by
/// `firstRequestBy`, each request's body by `limits.request` from its head, the next head by
/// `limits.idle` after an answer. A missed deadline closes this channel: an HTTP/1.1 connection,
/// or one stream of an HTTP/2 connection (its other streams go on).
final class HTTPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let service: HTTPService
    /// The TCP connection, counted in `service.connections`: this channel, or an HTTP/2 stream's parent.
    private let connection: any Channel
    private let firstRequestBy: NIODeadline
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var oversized = false
    private var deadline: Scheduled<Void>?
    private var firstDeadlineArmed = false
    /// A request of this channel is counted as being answered.
    private var answering = false
    private var stream: (sink: HTTPEventSink, stop: @Sendable () -> Void, heartbeat: RepeatedTask)?
    private var writer: HTTPBodyWriter?

    init(service: HTTPService, connection: any Channel, firstRequestBy: NIODeadline) {
        self.service = service
        self.connection = connection
        self.firstRequestBy = firstRequestBy
    }

    // Added to a live channel after TLS chose the protocol, or to a new one before it is active.
    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { armFirstDeadline(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        armFirstDeadline(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if let stream {
            stream.heartbeat.cancel()
            stream.stop()
            self.stream = nil
            service.connections.streamEnded(connection)
        }
        writer?.responseIsOver()
        writer = nil
        answered()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stream?.sink.drain()
            writer?.drain()
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            if !answering {
                answering = true
                service.connections.answering(connection)
            }
            arm(context, context.eventLoop.now + service.limits.request)
            head = h
            body = []
            oversized = h.headers.first(name: "content-length").flatMap { Int($0) }.map { $0 > service.limits.body } ?? false
        case .body(var chunk):
            if body.count + chunk.readableBytes > service.limits.body { oversized = true }
            if !oversized { body += chunk.readBytes(length: chunk.readableBytes) ?? [] }
        case .end:
            deadline?.cancel()
            guard let h = head else { return }
            head = nil
            answer(context, h)
        }
    }

    private func answer(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        // An HTTP/2 stream carries one request; its connection stays for the others.
        let keepAlive = head.version.major >= 2 || head.isKeepAlive
        if let refusal = service.refusal(head, oversized: oversized) {
            respond(context, head, refusal, keepAlive: false)
            return
        }
        var headers: [String: String] = [:]
        for (name, value) in head.headers {
            let key = name.lowercased()
            headers[key] = headers[key].map { "\($0), \(value)" } ?? value
        }
        let request = HTTPRequest(method: head.method.rawValue, target: head.uri, headers: headers, body: body)
        body = []
        let response: EventLoopFuture<HTTPResponse>
        if let pool = service.pool {
            response = pool.runIfActive(eventLoop: context.eventLoop) { [routes = service.routes] in routes(request) }
        } else {
            response = context.eventLoop.makeSucceededFuture(service.routes(request))
        }
        let loop = context.eventLoop
        response
            .flatMap { Self.given($0, on: loop) }
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let response): self.respond(context, head, response, keepAlive: keepAlive)
                case .failure: context.close(promise: nil)
                }
            }
    }

    /// The response itself once a `.later` one is given: the route's thread is back in the pool
    /// meanwhile, and the answer comes when it comes.
    private static func given(_ response: HTTPResponse, on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        guard case .later(let start) = response else { return loop.makeSucceededFuture(response) }
        let promise = loop.makePromise(of: HTTPResponse.self)
        start { promise.succeed($0) }
        return promise.futureResult.flatMap { given($0, on: loop) }
    }

    private func respond(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ response: HTTPResponse, keepAlive: Bool) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders([("X-Content-Type-Options", "nosniff")])
        switch response {
        case .full(let status, let type, let bytes, let extra):
            headers.add(name: "Content-Type", value: type)
            headers.add(name: "Content-Length", value: String(bytes.count))
            writeHead(context, request, status: status, headers: headers, extra: extra, keepAlive: keepAlive)
            if request.method != .HEAD && !bytes.isEmpty {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)))), promise: nil)
            }
            writeEnd(context, keepAlive: keepAlive)
        case .chunked(let status, let type, let extra, let open):
            headers.add(name: "Content-Type", value: type)
            writeHead(context, request, status: status, headers: headers, extra: extra, keepAlive: keepAlive)
            context.flush()
            let loopBound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
            let writer = HTTPBodyWriter(channel: context.channel, alreadyEnded: request.method == .HEAD) {
                let (handler, context) = loopBound.value
                handler.writer = nil
                handler.writeEnd(context, keepAlive: keepAlive)
            }
            if request.method == .HEAD {
                writeEnd(context, keepAlive: keepAlive)
            } else {
                self.writer = writer
            }
            open(writer)
        case .stream(let type, let open):
            guard service.connections.streaming(connection) else {
                respond(context, request, .text(503, "503: too many event streams open\n"), keepAlive: false)
                return
            }
            headers.add(name: "Content-Type", value: type)
            headers.add(name: "Cache-Control", value: "no-store")
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .ok, headers: headers))), promise: nil)
            let sink = HTTPEventSink(channel: context.channel)
            // A comment now and then: a client that left is noticed when the write fails, and
            // proxies do not close a quiet stream.
            let heartbeat = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(10), delay: .seconds(10)) { _ in
                sink.send(Array(": keep-alive\n\n".utf8))
            }
            stream = (sink, open(sink), heartbeat)
        case .later:
            // Resolved in `answer` before a response gets here.
            respond(context, request, .text(500, "500: an answer that never came\n"), keepAlive: false)
        }
    }

    private func writeHead(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, status: Int, headers: HTTPHeaders,
                           extra: [String: String], keepAlive: Bool) {
        var headers = headers
        for (name, value) in extra.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .init(statusCode: status), headers: headers))),
                      promise: nil)
    }

    /// The end of an answer: the channel waits for its next request, or closes.
    private func writeEnd(_ context: ChannelHandlerContext, keepAlive: Bool) {
        guard context.channel.isActive else { return }
        // Waiting before the end goes out: writing it hands over the next pipelined request at once.
        if keepAlive {
            answered()
            arm(context, context.eventLoop.now + service.limits.idle)
        }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    private func answered() {
        guard answering else { return }
        answering = false
        service.connections.answered(connection)
    }

    private func armFirstDeadline(_ context: ChannelHandlerContext) {
        guard !firstDeadlineArmed else { return }
        firstDeadlineArmed = true
        arm(context, firstRequestBy)
    }

    private func arm(_ context: ChannelHandlerContext, _ by: NIODeadline) {
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(deadline: by) { channel.close(promise: nil) }
    }
}
