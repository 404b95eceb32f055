import Foundation

/// Where an RTMP client publishes, read from `rtmp[s]://HOST[:PORT]/APP/STREAM`: as FFmpeg
/// reads it, the application is the path up to the last `/` (one or two components: `live`,
/// `app/instance`), the stream name (the key, with any `?query`) the rest.
package struct RtmpAddress: Equatable, Sendable {
    package var tls: Bool
    package var host: String
    package var port: Int
    package var app: String
    package var stream: String

    /// What `connect` sends as tcUrl: the address without the stream name.
    package var tcUrl: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "rtmp\(tls ? "s" : "")://\(shownHost):\(port)/\(app)"
    }

    package struct Invalid: Error, CustomStringConvertible {
        package var description: String
    }

    package init(_ url: String) throws(Invalid) {
        let rest: Substring
        if url.hasPrefix("rtmps://") {
            tls = true
            rest = url.dropFirst(8)
        } else if url.hasPrefix("rtmp://") {
            tls = false
            rest = url.dropFirst(7)
        } else {
            throw Invalid(description: "not an rtmp:// or rtmps:// address")
        }
        guard let slash = rest.firstIndex(of: "/") else { throw Invalid(description: "the address names no application and stream") }
        var authority = rest[..<slash]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let path = rest[rest.index(after: slash)...]
        port = tls ? 443 : 1935
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { port = try Self.port(after.dropFirst()) }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = try Self.port(authority[authority.index(after: colon)...])
        } else {
            host = String(authority)
        }
        guard !host.isEmpty else { throw Invalid(description: "the address names no host") }
        // The query belongs to the stream name (a key's token), never to the application.
        let query = path.firstIndex(of: "?") ?? path.endIndex
        guard let last = path[..<query].lastIndex(of: "/") else {
            throw Invalid(description: "the address names no stream: write it like rtmp://HOST/APP/STREAM")
        }
        app = String(path[..<last])
        stream = String(path[path.index(after: last)...])
        guard !app.isEmpty, !stream.isEmpty else {
            throw Invalid(description: "the address names no application or no stream: write it like rtmp://HOST/APP/STREAM")
        }
    }

    private static func port(_ text: Substring) throws(Invalid) -> Int {
        guard let p = Int(text), (1...65535).contains(p) else { throw Invalid(description: "port '\(text)' is not a port number") }
        return p
    }
}
