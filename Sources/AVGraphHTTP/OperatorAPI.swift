import AVGraph
import Foundation

/// What `run --http` serves: the operator's page, and the API it reads and steers the run with.
/// Everything goes through what the control socket answers (`PipelineRun.answer(controlLine:)`)
/// and the run's event log, so the page and `ctl` cannot disagree.
///
/// | route | |
/// |---|---|
/// | `GET /` | the page |
/// | `GET /api/stats`, `GET /api/graph` | `ctl stats`, `ctl graph` (a node command's `path` not among what it needs) |
/// | `GET /api/events` | the events `ctl watch` gets, as Server-Sent Events |
/// | `GET /api/preview.jpg` | the picture after privacy, at most 0.25 s old |
/// | `POST /api/ctl` | one `ctl` request (JSON), its reply; needs the token |
/// | `GET /metrics` | what `--metrics` serves |
///
/// Safety: loopback unless `--http-allow-remote`. Requests that change the run are POST with
/// the token in `X-Avgraph-Token` (another web page the browser has open cannot read the token,
/// so it cannot drive the run). Off loopback, every request needs the token (`?token=` or the
/// header). Before a request gets here the server has refused names it does not serve (`Host`)
/// and commands from another origin (`HTTPService.refusal`). A node command may not name a
/// path: when it needs one (`clip`), the file goes to `clips/` in the run's working folder, named by
/// the pipeline and the time.
public struct OperatorAPI: Sendable {
    public let token: String
    let remote: Bool
    let pipeline: String
    let preview: PictureTap?
    let events: EventLog
    let answer: @Sendable ([UInt8]) -> [UInt8]
    /// The same, answered when the run has it (a `set`, a node's command): no thread waits.
    let answerLater: @Sendable ([UInt8], @escaping @Sendable ([UInt8]) -> Void) -> Void
    let metrics: @Sendable () -> String
    let clips: String
    /// Routes the run's nodes serve (`whep`'s `/whep/NODE`).
    let web: WebEndpoints?

    /// `remote`: served beyond loopback, so every request needs the token.
    public init(run: PipelineRun, token: String, remote: Bool, preview: PictureTap?) {
        self.init(pipeline: run.pipeline.settings.name, token: token, remote: remote, preview: preview, events: run.events,
                  answer: { run.answer(controlLine: $0) }, metrics: { MetricsText.render(run) },
                  clips: FileManager.default.currentDirectoryPath + "/clips",
                  answerLater: { line, reply in run.answer(controlLine: line, reply: reply) }, web: run.web)
    }

    /// The API over a run's parts: the fuzz target answers a `set` without waiting for a node,
    /// gives the event stream a log of its own and clips a scratch folder.
    package init(pipeline: String, token: String, remote: Bool, preview: PictureTap?, events: EventLog,
                 answer: @escaping @Sendable ([UInt8]) -> [UInt8], metrics: @escaping @Sendable () -> String, clips: String,
                 answerLater: (@Sendable ([UInt8], @escaping @Sendable ([UInt8]) -> Void) -> Void)? = nil, web: WebEndpoints? = nil) {
        self.web = web
        self.pipeline = pipeline
        self.token = token
        self.remote = remote
        self.preview = preview
        self.events = events
        self.answer = answer
        self.answerLater = answerLater ?? { line, reply in reply(answer(line)) }
        self.metrics = metrics
        self.clips = clips
    }

    public static func newToken() -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &g)) }.joined()
    }

    public func handle(_ r: HTTPRequest) -> HTTPResponse {
        let presented = r.headers["x-avgraph-token"] ?? r.query["token"]
        let authorized = presented.map { Self.same($0, token) } ?? false
        // The icon says nothing of the run: a browser asks for it without the page's token.
        if r.method == "GET" || r.method == "HEAD", let icon = Favicon.response(for: r.path) { return icon }
        // A node's own route (a WHEP viewer) judges its own requests: a viewer presents the token as a bearer, or needs none.
        // An `hls` sink's presentation is read like any HLS origin's: without a token, from any origin.
        if r.path.hasPrefix("/whep/") || r.path.hasPrefix("/hls/"), let web,
           let answer = web.answer(.init(method: r.method, path: r.path, query: r.query, headers: r.headers, body: r.body)) {
            return Self.response(answer)
        }
        if remote && !authorized { return .text(401, "401: this page needs its token (?token=...)\n") }
        switch (r.method, r.path) {
        case ("GET", "/"), ("HEAD", "/"):
            return .full(status: 200, contentType: "text/html; charset=utf-8", body: Array(OperatorPage.html(token: token).utf8),
                         headers: ["Cache-Control": "no-store", "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'"])
        case ("GET", "/api/stats"):
            return .json(200, ask(.stats))
        case ("GET", "/api/graph"):
            return .json(200, pageGraph())
        case ("GET", "/api/preview.jpg"):
            guard let picture = preview?.latest() else { return .text(503, "no picture yet\n") }
            do {
                return .full(status: 200, contentType: "image/jpeg", body: try JpegSnapshot.encode(picture),
                             headers: ["Cache-Control": "no-store", "X-Avgraph-Node": preview?.node ?? "", "X-Avgraph-Media-Time": String(picture.seconds),
                                       // A stranger's site could otherwise show the broadcast in an <img> in the operator's
                                       // own browser (it cannot read it, but it can show it: a picture is its own content).
                                       // (The ingest index, on another port, serves the previews it shows from its own origin.)
                                       "Cross-Origin-Resource-Policy": "same-origin"])
            } catch {
                return .text(503, "preview: \(error)\n")
            }
        case ("GET", "/api/events"):
            return .stream(contentType: "text/event-stream") { [events] sink in
                let listener = events.addListener { line in sink.send(Array("data: \(line)\n\n".utf8)) }
                return { events.removeListener(listener) }
            }
        case ("POST", "/api/ctl"):
            guard authorized else { return .text(401, "401: a command needs the page's token in X-Avgraph-Token\n") }
            return command(Data(r.body))
        case ("GET", "/metrics"), ("HEAD", "/metrics"):
            return Self.metrics(metrics())
        case (_, "/"), (_, "/api/stats"), (_, "/api/graph"), (_, "/api/preview.jpg"), (_, "/api/events"), (_, "/metrics"):
            return .text(405, "405: GET only\n", headers: ["Allow": "GET, HEAD"])
        case (_, "/api/ctl"):
            return .text(405, "405: POST only\n", headers: ["Allow": "POST"])
        default:
            return .text(404, "404: not found; the page is at /\n")
        }
    }

    /// A node route's answer as the server gives it: now, later, or in pieces.
    static func response(_ answer: WebEndpoints.Response) -> HTTPResponse {
        let type = answer.headers["Content-Type"] ?? "text/plain; charset=utf-8"
        let headers = answer.headers.filter { $0.key != "Content-Type" }
        if let later = answer.later {
            return .later { deliver in later { deliver(response($0)) } }
        }
        if let pieces = answer.pieces {
            return .chunked(status: answer.status, contentType: type, headers: headers) { writer in pieces(writer) }
        }
        return .full(status: answer.status, contentType: type, body: answer.body, headers: headers)
    }

    private func ask(_ request: ControlRequest, id: EventValue? = nil) -> [UInt8] { answer(Array(ControlEnvelope(request, id: id).line)) }

    /// A request the run answers when a node has taken it: the route's thread goes back to the pool meanwhile.
    private func later(_ request: ControlRequest, id: EventValue?) -> HTTPResponse {
        let line = Array(ControlEnvelope(request, id: id).line)
        return .later { [answerLater] respond in answerLater(line) { respond(.json(200, $0)) } }
    }

    /// One request of the page (or a script), decoded as the control socket decodes it and sent on
    /// as a typed envelope: what may not come over HTTP is refused here, a node command that
    /// writes a file gets its `path` from the server.
    private func command(_ body: Data) -> HTTPResponse {
        guard case .object? = try? JSONDecoder().decode(EventValue.self, from: body) else {
            return .json(400, ControlReply.refused("expected one JSON object, like {\"cmd\": \"stats\"}").line)
        }
        let envelope: ControlEnvelope
        switch ControlEnvelope.decode(line: body) {
        case .failure(let refusal): return .json(200, ControlReply(.failure(refusal), id: ControlEnvelope.id(of: body)).line)
        case .success(let e): envelope = e
        }
        switch envelope.request {
        case .watch:
            return .json(400, ControlReply.refused("watch needs the control socket; over HTTP the events stream from /api/events", id: envelope.id).line)
        case .node(let name, var fields):
            if fields["path"] != nil {
                return .json(403, ControlReply.refused("no paths over HTTP: a file saved from the page goes to clips/ in the run's folder", id: envelope.id).line)
            }
            if graph()?.nodes.contains(where: { $0.commands?.contains { $0.name == name && $0.needs.contains(Self.pathField) } == true }) == true {
                fields[Self.pathField] = .string(Self.clipPath(in: clips, pipeline: pipeline))
            }
            return later(.node(command: name, fields: fields), id: envelope.id)
        case .set:
            return later(envelope.request, id: envelope.id)
        default:
            return .json(200, ask(envelope.request, id: envelope.id))
        }
    }

    /// A node command's field naming a file to write: over HTTP the server names it.
    static let pathField = "path"

    private func graph() -> PipelineGraph? {
        try? ControlReply.decode(line: Data(ask(.graph)), as: PipelineGraph.self).outcome.get() as? PipelineGraph
    }

    /// `ctl graph`'s reply as the page needs it: a node command's `path` is not the page's to fill.
    private func pageGraph() -> [UInt8] {
        guard var g = graph() else { return ask(.graph) }
        for i in g.nodes.indices {
            g.nodes[i].commands = g.nodes[i].commands?.map { c in
                var c = c
                c.needs.removeAll { $0 == Self.pathField }
                return c
            }
        }
        return ControlReply(.success(g)).line
    }

    static func clipPath(in folder: String, pipeline: String) -> String {
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let stamp = ISO8601DateFormatter.string(from: Date(), timeZone: .current, formatOptions: [.withFullDate, .withTime])
        let safe = pipeline.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" }
        return "\(folder)/\(String(safe))-\(stamp).mp4"
    }

    static func metrics(_ text: String) -> HTTPResponse {
        .full(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: Array(text.utf8))
    }

    /// `--metrics` alone: `/metrics` and nothing else.
    public static func metricsOnly(_ run: PipelineRun, _ r: HTTPRequest) -> HTTPResponse {
        guard r.path == "/metrics" else { return .text(404, "not found: try /metrics\n") }
        guard r.method == "GET" || r.method == "HEAD" else { return .text(405, "only GET\n", headers: ["Allow": "GET, HEAD"]) }
        return metrics(MetricsText.render(run))
    }

    /// Compares in time independent of where the first difference is.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

extension HTTPBodyWriter: WebBodyWriter {}
