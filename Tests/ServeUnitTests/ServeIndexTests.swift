import AVGraphHTTP
import AVGraphServe
import XCTest

/// serve's index over sessions of the test's own: the list, the page, the previews.
final class ServeIndexTests: XCTestCase {
    /// One later answer, from whichever thread gives it.
    private final class LaterAnswer: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var response: HTTPResponse?
        func set(_ r: HTTPResponse) { response = r; done.signal() }
        func wait() -> HTTPResponse { done.wait(); return response! }
    }

    let entries = [
        ServeIndex.Entry(session: "s1", key: "<k>", app: "live", peer: "p", protocol: "rtmp", publishing: true, page: "http://127.0.0.1:9/"),
        ServeIndex.Entry(session: "s2", key: "b", app: "", peer: "p", protocol: "srt", publishing: false, page: nil),
    ]

    private func routes(_ preview: @escaping @Sendable (URL) -> ServeHTTP.Answer = { _ in .init(status: nil, body: Data()) }) -> @Sendable (HTTPRequest) -> HTTPResponse {
        let entries = entries
        return ServeIndex.routes(sessions: { entries }, preview: { url, done in done(preview(url)) })
    }

    /// The status and body of `r`, a later answer waited for (a preview is fetched by callback).
    private func body(_ r: HTTPResponse) -> (Int, String) {
        switch r {
        case .full(let status, _, let body, _): return (status, String(decoding: body, as: UTF8.self))
        case .later(let start):
            let answer = LaterAnswer()
            start { answer.set($0) }
            return body(answer.wait())
        default: return (0, "")
        }
    }

    func testSessionsIsTheListAsJSON() throws {
        let (status, text) = body(routes()(HTTPRequest(method: "GET", target: "/sessions")))
        XCTAssertEqual(status, 200)
        XCTAssertEqual(try JSONDecoder().decode([ServeIndex.Entry].self, from: Data(text.utf8)), entries)
    }

    func testThePageEscapesKeysAndSaysWhoIsStarting() {
        let (status, html) = body(routes()(HTTPRequest(method: "GET", target: "/")))
        XCTAssertEqual(status, 200)
        XCTAssertTrue(html.contains("&lt;k&gt;") && !html.contains("<k>"), html)
        XCTAssertTrue(html.contains("<h1>Live sessions (2)</h1>"))
        XCTAssertTrue(html.contains("href=\"http://127.0.0.1:9/\""))
        XCTAssertTrue(html.contains("<span>b</span> (starting)"), html)
    }

    func testPreviewsComeFromTheRunsPage() {
        let r = routes { url in
            url.absoluteString == "http://127.0.0.1:9/api/preview.jpg" ? .init(status: 200, body: Data([0xFF, 0xD8])) : .init(status: 500, body: Data())
        }
        XCTAssertEqual(body(r(HTTPRequest(method: "GET", target: "/preview/s1.jpg"))).0, 200)
        guard case .later = r(HTTPRequest(method: "GET", target: "/preview/s1.jpg")) else { return XCTFail("a preview is fetched without holding the route's thread") }
        XCTAssertEqual(body(r(HTTPRequest(method: "GET", target: "/preview/s2.jpg"))).0, 503, "no page yet")
        XCTAssertEqual(body(r(HTTPRequest(method: "GET", target: "/preview/s3.jpg"))).0, 404)
        XCTAssertEqual(body(r(HTTPRequest(method: "POST", target: "/"))).0, 405)
        XCTAssertEqual(body(r(HTTPRequest(method: "GET", target: "/x"))).0, 404)
    }
}
