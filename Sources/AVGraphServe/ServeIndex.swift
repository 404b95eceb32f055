import AVGraphHTTP
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `avgraph serve --http ADDRESS`: every live session with its preview, each linking to its own
/// run's operator page (each run serves one on a loopback port the system picks). `/sessions`
/// is the same list as JSON. The previews are fetched from the runs and served from here: a
/// run's preview may only be shown by pages of its own origin (Cross-Origin-Resource-Policy).
public enum ServeIndex {
    public struct Entry: Codable, Sendable, Equatable {
        public var session: String
        public var key: String
        public var app: String
        public var peer: String
        public var `protocol`: String
        public var publishing: Bool
        /// The run's own page; nil until its `page` event has said it.
        public var page: String?
        public init(session: String, key: String, app: String, peer: String, protocol: String, publishing: Bool, page: String?) {
            self.session = session; self.key = key; self.app = app; self.peer = peer; self.protocol = `protocol`
            self.publishing = publishing; self.page = page
        }
    }

    public static func routes(_ server: ServeServer) -> @Sendable (HTTPRequest) -> HTTPResponse {
        routes(sessions: { [server] in server.liveSessions() }, preview: { ServeHTTP.get($0, timeout: 2, done: $1) })
    }

    /// The index over `sessions`, fetching a run's preview with `preview`, which calls back with the
    /// answer (a test gives its own): the route's thread goes back to the pool meanwhile.
    public static func routes(sessions: @escaping @Sendable () -> [Entry],
                              preview fetch: @escaping @Sendable (URL, @escaping @Sendable (ServeHTTP.Answer) -> Void) -> Void)
        -> @Sendable (HTTPRequest) -> HTTPResponse {
        { request in
            guard request.method == "GET" || request.method == "HEAD" else { return .text(405, "405: GET only\n", headers: ["Allow": "GET, HEAD"]) }
            if let icon = Favicon.response(for: request.path) { return icon }
            let entries = sessions()
            switch request.path {
            case "/sessions":
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                return .json(200, Array((try? encoder.encode(entries)) ?? Data("[]".utf8)))
            case "/":
                return .full(status: 200, contentType: "text/html; charset=utf-8", body: Array(page(entries).utf8), headers: ["Cache-Control": "no-store"])
            case let p where p.hasPrefix("/preview/") && p.hasSuffix(".jpg"):
                let id = String(p.dropFirst("/preview/".count).dropLast(4))
                guard let run = entries.first(where: { $0.session == id }) else { return .text(404, "404: no such live session\n") }
                guard let page = run.page, let url = URL(string: page + "api/preview.jpg") else { return .text(503, "503: no picture yet\n") }
                return .later { respond in fetch(url) { respond(preview($0)) } }
            default:
                return .text(404, "404: the list is at /\n")
            }
        }
    }

    private static func preview(_ answer: ServeHTTP.Answer) -> HTTPResponse {
        guard answer.status == 200 else { return .text(503, "503: no picture yet\n") }
        return .full(status: 200, contentType: "image/jpeg", body: Array(answer.body), headers: ["Cache-Control": "no-store"])
    }

    private static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func page(_ entries: [Entry]) -> String {
        let rows = entries.map { e -> String in
            let id = escape(e.session), name = escape(e.app.isEmpty ? e.key : e.app + "/" + e.key), key = escape(e.key)
            let state = e.publishing ? "" : " (waiting for its publisher)"
            guard let page = e.page else { return "<li class=\"stream\" data-name=\"\(key)\" data-session=\"\(id)\"><span>\(name)</span> (starting)</li>" }
            return "<li class=\"stream\" data-name=\"\(key)\" data-session=\"\(id)\"><a href=\"\(escape(page))\"><img src=\"/preview/\(id).jpg\" alt=\"\(name)\">"
                + "<span>\(name) · \(escape(e.protocol)) · \(id)\(state)</span></a></li>"
        }
        return "<!doctype html><html lang=en><head><meta charset=utf-8><title>avgraph serve</title>" + Favicon.link
            + "<meta http-equiv=\"refresh\" content=\"3\"><style>body{font:14px system-ui,sans-serif;background:#15171a;color:#e8e8e8;margin:1em}"
            + "ul{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:1em}li{background:#202328;padding:.6em;border-radius:.4em}"
            + "img{display:block;width:320px;background:#000;margin-bottom:.4em}a{color:#9cf}</style></head><body>"
            + "<h1>Live sessions (\(entries.count))</h1><ul>\(rows.isEmpty ? "<li>nobody is publishing</li>" : rows.joined())</ul></body></html>"
    }
}
