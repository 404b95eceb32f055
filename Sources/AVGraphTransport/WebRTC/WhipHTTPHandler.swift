import NIOCore
import NIOHTTP1

/// One HTTP connection to a WHIP endpoint (RFC 9725) on SwiftNIO: a request's head is judged
/// before its body is read (a wrong key is refused without reading the offer), the body is
/// bounded, and the endpoint's answer is written with the CORS headers a publishing page on
/// another origin needs (a bearer token is no ambient authority: any origin may use one).
final class WhipHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    struct Request {
        var method: HTTPMethod
        var path: String
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    struct Response {
        var status: HTTPResponseStatus
        var headers: [(String, String)] = []
        var body: String = ""
    }

    /// Judges a request's head: a response ends it there (nil: read the body).
    let judgeHead: (Request) -> Response?
    /// Answers a whole request.
    let answer: (Request) -> Response
    private var request: Request?
    private var refused = false
    static let maxBody = 64 * 1024

    init(judgeHead: @escaping (Request) -> Response?, answer: @escaping (Request) -> Response) {
        self.judgeHead = judgeHead
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            refused = false
            let r = Request(method: head.method, path: head.uri, headers: head.headers, body: [])
            if let early = judgeHead(r) {
                refused = true
                respond(context, early, close: true)
                return
            }
            request = r
        case .body(var buffer):
            guard !refused, request != nil else { return }
            if request!.body.count + buffer.readableBytes > Self.maxBody {
                refused = true
                request = nil
                respond(context, Response(status: .payloadTooLarge, body: "an offer is at most \(Self.maxBody) bytes\n"), close: true)
                return
            }
            request!.body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard !refused, let r = request else { return }
            request = nil
            respond(context, answer(r), close: !r.headers[canonicalForm: "connection"].contains { $0.lowercased() == "keep-alive" } && r.method != .OPTIONS)
        }
    }

    static let cors: [(String, String)] = [
        ("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Allow-Methods", "POST, PATCH, DELETE, OPTIONS"),
        ("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match"),
        ("Access-Control-Expose-Headers", "Location, ETag, Link"),
    ]

    private func respond(_ context: ChannelHandlerContext, _ response: Response, close: Bool) {
        var headers = HTTPHeaders(Self.cors + response.headers)
        if !headers.contains(name: "Content-Type") && !response.body.isEmpty { headers.add(name: "Content-Type", value: "text/plain; charset=utf-8") }
        headers.add(name: "Content-Length", value: String(response.body.utf8.count))
        headers.add(name: "Cache-Control", value: "no-store")
        if close { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))), promise: nil)
        if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: response.body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if close {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
