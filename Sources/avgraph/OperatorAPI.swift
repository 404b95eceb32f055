import AVGraph
import Foundation

/// What `run --http` serves: the operator's page, and the API it reads and steers the run with.
/// Everything goes through what the control socket answers (`PipelineRun.answer(controlLine:)`)
/// and the run's event log, so the page and `ctl` cannot disagree.
///
/// | route | |
/// |---|---|
/// | `GET /` | the page |
/// | `GET /api/stats`, `GET /api/graph` | `ctl stats`, `ctl graph` |
/// | `GET /api/events` | the events `ctl watch` gets, as Server-Sent Events |
/// | `GET /api/preview.jpg` | the picture after privacy, at most 0.25 s old |
/// | `POST /api/ctl` | one `ctl` request (JSON), its reply; needs the token |
/// | `GET /metrics` | what `--metrics` serves |
///
/// Safety: loopback unless `--http-allow-remote`. Requests that change the run are POST with
/// the token in `X-Avgraph-Token` (another web page the browser has open cannot read the token,
/// so it cannot drive the run). Off loopback, every request needs the token (`?token=` or the
/// header). A `clip` request may not name a path: the page's clips go to `clips/` in the run's
/// working folder, named by the pipeline and the time.
struct OperatorAPI: Sendable {
    let run: PipelineRun
    let token: String
    let remote: Bool
    let preview: PictureTap?

    static func newToken() -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &g)) }.joined()
    }

    func handle(_ r: HTTPServer.Request) -> HTTPServer.Response {
        let presented = r.headers["x-avgraph-token"] ?? r.query["token"]
        let authorized = presented.map { Self.same($0, token) } ?? false
        if remote && !authorized { return .text(401, "401: this page needs its token (?token=...)\n") }
        switch (r.method, r.path) {
        case ("GET", "/"), ("HEAD", "/"):
            return .full(status: 200, contentType: "text/html; charset=utf-8", body: Array(OperatorPage.html(token: token).utf8),
                         headers: ["Cache-Control": "no-store", "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'"])
        case ("GET", "/api/stats"):
            return .json(200, run.answer(controlLine: Array("{\"cmd\":\"stats\"}".utf8)))
        case ("GET", "/api/graph"):
            return .json(200, run.answer(controlLine: Array("{\"cmd\":\"graph\"}".utf8)))
        case ("GET", "/api/preview.jpg"):
            guard let picture = preview?.latest() else { return .text(503, "no picture yet\n") }
            do {
                return .full(status: 200, contentType: "image/jpeg", body: try JpegSnapshot.encode(picture),
                             headers: ["Cache-Control": "no-store", "X-Avgraph-Node": preview?.node ?? "", "X-Avgraph-Media-Time": String(picture.seconds)])
            } catch {
                return .text(503, "preview: \(error)\n")
            }
        case ("GET", "/api/events"):
            let events = run.events
            return .stream(contentType: "text/event-stream") { stream in
                let listener = events.addListener { line in stream.enqueue(Array("data: \(line)\n\n".utf8)) }
                defer { events.removeListener(listener) }
                stream.pump()
            }
        case ("POST", "/api/ctl"):
            guard authorized else { return .text(401, "401: a command needs the page's token in X-Avgraph-Token\n") }
            guard case .object(var request)? = try? JSONDecoder().decode(EventValue.self, from: Data(r.body)) else {
                return .json(400, Array("{\"ok\":false,\"error\":\"expected one JSON object, like {\\\"cmd\\\": \\\"stats\\\"}\"}".utf8))
            }
            if request["path"] != nil {
                return .json(403, Array("{\"ok\":false,\"error\":\"no paths over HTTP: a clip saved from the page goes to clips/ in the run's folder\"}".utf8))
            }
            switch request["cmd"] {
            case .string("watch")?:
                return .json(400, Array("{\"ok\":false,\"error\":\"watch needs the control socket; over HTTP the events stream from /api/events\"}".utf8))
            case .string("clip")?:
                request["path"] = .string(Self.clipPath(pipeline: run.pipeline.settings.name))
                let line = (try? JSONEncoder().encode(EventValue.object(request))).map { Array($0) } ?? []
                return .json(200, run.answer(controlLine: line))
            default:
                return .json(200, run.answer(controlLine: r.body))
            }
        case ("GET", "/metrics"), ("HEAD", "/metrics"):
            return Self.metrics(run)
        case (_, "/"), (_, "/api/stats"), (_, "/api/graph"), (_, "/api/preview.jpg"), (_, "/api/events"), (_, "/metrics"):
            return .full(status: 405, contentType: "text/plain; charset=utf-8", body: Array("405: GET only\n".utf8), headers: ["Allow": "GET, HEAD"])
        case (_, "/api/ctl"):
            return .full(status: 405, contentType: "text/plain; charset=utf-8", body: Array("405: POST only\n".utf8), headers: ["Allow": "POST"])
        default:
            return .text(404, "404: not found; the page is at /\n")
        }
    }

    static func clipPath(pipeline: String) -> String {
        let folder = FileManager.default.currentDirectoryPath + "/clips"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let stamp = ISO8601DateFormatter.string(from: Date(), timeZone: .current, formatOptions: [.withFullDate, .withTime])
        let safe = pipeline.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" }
        return "\(folder)/\(String(safe))-\(stamp).mp4"
    }

    static func metrics(_ run: PipelineRun) -> HTTPServer.Response {
        .full(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: Array(MetricsText.render(run).utf8))
    }

    /// `--metrics` alone: `/metrics` and nothing else.
    static func metricsOnly(_ run: PipelineRun, _ r: HTTPServer.Request) -> HTTPServer.Response {
        guard r.path == "/metrics" else { return .text(404, "not found: try /metrics\n") }
        guard r.method == "GET" || r.method == "HEAD" else {
            return .full(status: 405, contentType: "text/plain; charset=utf-8", body: Array("only GET\n".utf8), headers: ["Allow": "GET, HEAD"])
        }
        return metrics(run)
    }

    /// Compares in time independent of where the first difference is.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
