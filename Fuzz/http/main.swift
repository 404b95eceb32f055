@testable import AVGraph
@testable import AVGraphHTTP
import AVGraphNodes
import CFuzzDriver
import Foundation
import FuzzSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1

/// libFuzzer target: bytes as what a client sends to the port of `run --http`: requests, whole,
/// cut or pipelined, through the server's own connection pipeline (`HTTPService.configure`:
/// NIOHTTP1's decoder and encoder, the connection handler, the Host/Origin/size rules) in an
/// EmbeddedChannel, into the operator page, its API and /metrics of a built, not started, run.
/// The first byte picks the read sizes and the page: on loopback, or off it (every request needs
/// the token). Then the answers are read back, request by request (the requests as a second,
/// bare NIOHTTP1 decoder reads them), and held to the rules: no answer to a foreign `Host` but
/// 421 or 400, a command from a foreign `Origin` gets 403, the token only in the page (or quoted
/// back to a client that sent its text), and never off loopback to a request without it.
// The privacy card's picture: scripts/fuzz runs from the package's folder.
let run = builtRun("""
    pipeline: fuzz-http
    nodes:
      screen:  {type: testsrc, size: 64x48, rate: 10}
      cover:   {type: privacy, in: screen, image: "\(FileManager.default.currentDirectoryPath)/assets/privacy.png"}
      sound:   {type: tone, freq: 440}
      level:   {type: meter, in: sound}
      mix:     {type: mixer, in: [level]}
      picture: {type: h264, in: cover, bitrate: 300k}
      out:     {type: null, in: [picture, mix]}
    """, target: "http")

let token = "fuzz-token-0123456789abcdef"

/// A `set` waits up to 5 s for its node's thread, which a run not started does not have: here it
/// is answered at once, as a refusal. Everything else is the run's own answer.
@Sendable func answerWithoutWaiting(_ line: [UInt8]) -> [UInt8] {
    if case .success(let envelope) = ControlEnvelope.decode(line: Data(line)), case .set(let change) = envelope.request, change.at == nil {
        return ControlReply(.failure(ControlRefusal("not taken: the fuzz target's run has no node threads")), id: envelope.id).line
    }
    return run.answer(controlLine: line)
}

struct Page {
    let names: HTTPNames
    let remote: Bool
    let service: HTTPService
}

let pages: [Page] = ["127.0.0.1:8090", "0.0.0.0:8090"].map { text in
    let address = HTTPAddress(text)!
    let names = HTTPNames(bound: address, extra: ["studio.example"])
    // Its own event log: the run's delivers on a queue of its own, and an EmbeddedChannel has one thread.
    let api = OperatorAPI(pipeline: run.pipeline.settings.name, token: token, remote: !address.isLoopback, preview: nil,
                          events: EventLog(output: .none), answer: answerWithoutWaiting, metrics: { MetricsText.render(run) },
                          clips: NSTemporaryDirectory() + "avgraph-fuzz-http/clips")
    let service = HTTPService(names: names, tls: nil, limits: .init(), pool: nil) { api.handle($0) }
    return Page(names: names, remote: !address.isLoopback, service: service)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHttp(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let page = pages[Int(bytes[0] & 1)]
    let piece = Int(bytes[0] >> 1) * 8 + 1
    let input = UnsafeBufferPointer(start: bytes + 1, count: count - 1)

    let channel = EmbeddedChannel()
    try! page.service.configure(channel)
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
    var output: [UInt8] = []
    func collect() {
        while let part = try? channel.readOutbound(as: IOData.self) {
            if case .byteBuffer(var b) = part { output += b.readBytes(length: b.readableBytes) ?? [] }
        }
    }
    var offset = 0
    while offset < input.count && channel.isActive {
        let n = min(piece, input.count - offset)
        _ = try? channel.writeInbound(ByteBuffer(bytes: input[offset..<(offset + n)]))
        offset += n
        collect()
    }
    // Past every deadline: the connection closes, an open event stream with it.
    channel.embeddedEventLoop.advanceTime(by: .seconds(11))
    collect()
    precondition(!channel.isActive || String(decoding: output, as: UTF8.self).contains("text/event-stream"),
                 "a connection outlived its deadline without an event stream open")
    _ = try? channel.finish(acceptAlreadyClosed: true)
    precondition(page.service.connections.count == 0, "a closed connection still holds a place")

    let heads = requestHeads(Array(input))
    let answers = parseAnswers(output, heads: heads)
    let sent = String(decoding: input, as: UTF8.self)
    for (head, answer) in zip(heads, answers) { check(answer, to: head, on: page, sent: sent) }
    return 0
}

/// The request heads in the bytes, as a bare NIOHTTP1 decoder reads them (up to its first error).
func requestHeads(_ bytes: [UInt8]) -> [HTTPRequestHead] {
    let decoder = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder()))
    _ = try? decoder.writeInbound(ByteBuffer(bytes: bytes))
    var heads: [HTTPRequestHead] = []
    while let part = try? decoder.readInbound(as: HTTPServerRequestPart.self) {
        if case .head(let h) = part { heads.append(h) }
    }
    _ = try? decoder.finish(acceptAlreadyClosed: true)
    return heads
}

struct Answer {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
}

/// The server's answers, in order: each a status line, headers, and a body of its Content-Length
/// (none to a HEAD), or the rest without one (an event stream, the last answer).
func parseAnswers(_ bytes: [UInt8], heads: [HTTPRequestHead]) -> [Answer] {
    var answers: [Answer] = []
    var rest = bytes[...]
    while !rest.isEmpty {
        let text = String(decoding: rest.prefix(20000), as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { preconditionFailure("an answer without the end of its head: \(text)") }
        let lines = text[..<end.lowerBound].components(separatedBy: "\r\n")
        precondition(lines[0].hasPrefix("HTTP/1."), "not a status line: \(lines[0])")
        let status = Int(lines[0].split(separator: " ")[1])!
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            let colon = line.firstIndex(of: ":")!
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        rest = rest.dropFirst(text[..<end.upperBound].utf8.count)
        guard let declared = headers["content-length"].flatMap({ Int($0) }) else {
            answers.append(Answer(status: status, headers: headers, body: Array(rest)))
            break
        }
        let toHead = answers.count < heads.count && heads[answers.count].method == .HEAD
        let length = toHead ? 0 : declared
        answers.append(Answer(status: status, headers: headers, body: Array(rest.prefix(length))))
        rest = rest.dropFirst(length)
    }
    return answers
}

func check(_ answer: Answer, to head: HTTPRequestHead, on page: Page, sent: String) {
    let hosts = head.headers["host"]
    let body = String(decoding: answer.body, as: UTF8.self)
    if let host = hosts.first, !page.names.answers(host: host) {
        precondition([400, 421].contains(answer.status), "\(answer.status) to a foreign Host \(host)")
    }
    if head.method != .GET && head.method != .HEAD, hosts.count == 1, page.names.answers(host: hosts[0]),
       let origin = head.headers.first(name: "origin"), !HTTPNames.sameOrigin(origin, host: hosts[0], scheme: "http") {
        // A WHEP resource takes other origins (a player's bearer token); this page has no whep sink, so none is there.
        if HTTPService.isWhepResource(head.uri) {
            precondition(!(200..<300).contains(answer.status), "\(answer.status) to a WHEP request from \(origin) with no whep sink")
        } else {
            precondition([400, 403].contains(answer.status), "\(answer.status) to a command from \(origin)")
        }
    }
    if body.contains(token) {
        let presented = head.headers["x-avgraph-token"].isEmpty ? HTTPRequest(method: "GET", target: head.uri).query["token"]
            : head.headers["x-avgraph-token"].joined(separator: ", ")
        precondition(!page.remote || presented == token, "the token off loopback to a request without it")
        // A command's refusal quotes what it was sent (`unknown command '...'`): a client that sent the
        // token's text gets it back. Only the page itself may carry it unasked.
        let isPage = answer.status == 200 && answer.headers["content-type"]?.hasPrefix("text/html") == true
        precondition(isPage || sent.contains(token), "the token outside the page, and not an echo of the request")
    }
}

@_cdecl("FuzzHttp_main")
public func fuzzHttpMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzHttp($0!, $1) }
}
