import Foundation

/// One request as the routes of a server see it, after NIOHTTP1 has parsed it and the server has
/// checked its `Host`, `Origin` and size.
public struct HTTPRequest: Sendable {
    public var method: String
    public var path: String
    public var query: [String: String]
    /// Names lower-cased; a header sent more than once has its values joined by ", ".
    public var headers: [String: String]
    public var body: [UInt8]

    public init(method: String, target: String, headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        (path, query) = Self.split(target: target)
        self.headers = headers
        self.body = body
    }

    /// A request target's path and query fields: `/a?x=1&y` is `/a` with x=1 and y empty. Total
    /// (whatever a client sends is some path and some fields): an empty pair or key, a pair
    /// without `=`, `%` that does not decode (kept as sent); the last of a repeated key counts.
    static func split(target: String) -> (path: String, query: [String: String]) {
        let beforeFragment = target.prefix { $0 != "#" }
        guard let mark = beforeFragment.firstIndex(of: "?") else { return (String(beforeFragment), [:]) }
        var fields: [String: String] = [:]
        for pair in beforeFragment[beforeFragment.index(after: mark)...].split(separator: "&") {
            let key = pair.prefix { $0 != "=" }
            let value = pair.dropFirst(key.count + 1)
            fields[decoded(key)] = decoded(value)
        }
        return (String(beforeFragment[..<mark]), fields)
    }

    private static func decoded(_ text: Substring) -> String { text.removingPercentEncoding ?? String(text) }
}

/// What a route answers.
public enum HTTPResponse: Sendable {
    case full(status: Int, contentType: String, body: [UInt8], headers: [String: String] = [:])
    /// A response that stays open (Server-Sent Events): `open` starts feeding the sink and
    /// returns what stops it, called once when the connection ends.
    case stream(contentType: String, open: @Sendable (HTTPEventSink) -> @Sendable () -> Void)
    /// An answer the route gives later (a node's answer to a command): `start` is called once and
    /// must not block; it hands the response to its argument whenever it has it. No thread of the
    /// server's waits meanwhile. The response it hands over may be any other kind (`.chunked` too).
    case later(start: @Sendable (@escaping @Sendable (HTTPResponse) -> Void) -> Void)
    /// A body written in pieces as they come (an LL-HLS part being written): `open` is called once,
    /// on no particular thread, with a writer; whoever has bytes calls `write` (any thread), then `end`.
    case chunked(status: Int, contentType: String, headers: [String: String] = [:], open: @Sendable (HTTPBodyWriter) -> Void)

    public static func text(_ status: Int, _ text: String, headers: [String: String] = [:]) -> HTTPResponse {
        .full(status: status, contentType: "text/plain; charset=utf-8", body: Array(text.utf8), headers: headers)
    }

    public static func json(_ status: Int, _ bytes: [UInt8]) -> HTTPResponse {
        .full(status: status, contentType: "application/json", body: bytes, headers: ["Cache-Control": "no-store"])
    }
}
