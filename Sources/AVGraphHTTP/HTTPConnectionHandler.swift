import NIOCore
import NIOHTTP1

/// One connection's requests, after NIOHTTP1's decoder (which, with its pipelining helper, hands
/// them over one at a time): each checked by the service's rules, then answered by its route off
/// the event loop, the answer written back on it. Keeps the connection's deadlines: the first
/// request by `limits.request` from the start, each request's body by `limits.request` from its
/// head, the next head by `limits.idle` after an answer. A missed deadline closes the connection.
final class HTTPConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let service: HTTPService
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var oversized = false
    private var deadline: Scheduled<Void>?
    private var stream: (sink: HTTPEventSink, stop: @Sendable () -> Void, heartbeat: RepeatedTask)?

    init(service: HTTPService) { self.service = service }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, service.limits.request)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        if let stream {
            stream.heartbeat.cancel()
            stream.stop()
            self.stream = nil
        }
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { stream?.sink.drain() }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            service.connections.busy(context.channel)
            arm(context, service.limits.request)
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
            .flatMap { response -> EventLoopFuture<HTTPResponse> in
                // Given later: the route's thread is back in the pool, and the answer comes when it comes.
                guard case .later(let start) = response else { return loop.makeSucceededFuture(response) }
                let promise = loop.makePromise(of: HTTPResponse.self)
                start { promise.succeed($0) }
                return promise.futureResult
            }
            .assumeIsolated()
            .whenComplete { result in
                switch result {
                case .success(let response): self.respond(context, head, response, keepAlive: head.isKeepAlive)
                case .failure: context.close(promise: nil)
                }
            }
    }

    private func respond(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, _ response: HTTPResponse, keepAlive: Bool) {
        guard context.channel.isActive else { return }
        var headers = HTTPHeaders([("X-Content-Type-Options", "nosniff")])
        switch response {
        case .full(let status, let type, let bytes, let extra):
            headers.add(name: "Content-Type", value: type)
            headers.add(name: "Content-Length", value: String(bytes.count))
            for (name, value) in extra.sorted(by: { $0.key < $1.key }) { headers.add(name: name, value: value) }
            if !keepAlive { headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .init(statusCode: status), headers: headers))),
                          promise: nil)
            if request.method != .HEAD && !bytes.isEmpty {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)))), promise: nil)
            }
            // Waiting before the end goes out: writing it hands over the next pipelined request at once.
            if keepAlive {
                service.connections.waiting(context.channel)
                arm(context, service.limits.idle)
            }
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                let channel = context.channel
                written.whenComplete { _ in channel.close(promise: nil) }
            }
        case .stream(let type, let open):
            guard service.connections.streaming(context.channel) else {
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
            // Resolved in `answer` before a response gets here; a route that nests one is a bug.
            respond(context, request, .text(500, "500: an answer that never came\n"), keepAlive: false)
        }
    }

    private func arm(_ context: ChannelHandlerContext, _ limit: TimeAmount) {
        deadline?.cancel()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
    }
}
