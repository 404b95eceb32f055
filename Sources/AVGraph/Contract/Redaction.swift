import Foundation

/// Stream keys and passwords kept out of what avgraph prints: events, errors, the status line,
/// `ctl get`. An RTMP URL names its stream key after the application
/// (`rtmp://host/app/KEY`), SRT carries `passphrase` and `streamid` in its query, any URL may
/// carry `user:password@`. Nodes that hold such a URL print `Redaction.url(url)`; free text that
/// may quote one (an error message) goes through `Redaction.text`.
public enum Redaction {
    public static let mask = "***"

    static let schemes = ["rtmp", "rtmps", "rtmpt", "rtmpe", "rtmpte", "rtmpts", "srt"]
    /// Query parameters that are secrets whatever the scheme.
    static let secretParameters: Set<String> = ["passphrase", "streamid", "key", "token", "password", "pass", "secret", "auth"]

    /// `url` with its secrets replaced by `***`: the RTMP path after the application, the
    /// SRT passphrase and stream id, any password. Host, port and application stay readable.
    public static func url(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        var rest = String(url[schemeEnd.upperBound...])
        var fragment = ""
        if let hash = rest.firstIndex(of: "#") {
            fragment = "#" + mask
            rest = String(rest[..<hash])
        }
        var query: String?
        if let q = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: q)...])
            rest = String(rest[..<q])
        }
        var authority = rest
        var path = ""
        if let slash = rest.firstIndex(of: "/") {
            authority = String(rest[..<slash])
            path = String(rest[slash...])
        }
        // user:password@host: the password goes.
        if let at = authority.lastIndex(of: "@") {
            let user = authority[..<at]
            let host = authority[authority.index(after: at)...]
            let name = user.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            authority = (user.contains(":") ? name + ":" + mask : String(user)) + "@" + host
        }
        if scheme.hasPrefix("rtmp") {
            // rtmp://host/APP/KEY...: everything after the application is the stream key.
            let segments = path.split(separator: "/")
            if segments.count >= 2 { path = "/" + segments[0] + "/" + mask }
            // A query on an RTMP URL is a key's other place (`?key=`): all of it goes.
            if query != nil { query = mask }
        } else if let q = query {
            query = q.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard kv.count == 2, secretParameters.contains(kv[0].lowercased()) else { return String(pair) }
                return kv[0] + "=" + mask
            }.joined(separator: "&")
        }
        return scheme + "://" + authority + path + (query.map { "?" + $0 } ?? "") + fragment
    }

    /// `text` with every URL of a streaming scheme in it redacted (it ends at white space or a quote).
    public static func text(_ text: String) -> String {
        guard text.contains("://") else { return text }
        var out = ""
        var rest = Substring(text)
        while let start = firstURL(in: rest) {
            out += rest[..<start]
            var end = rest[start...].firstIndex { $0.isWhitespace || "'\"<>`".contains($0) } ?? rest.endIndex
            // Trailing punctuation of the sentence is not part of the URL.
            while end > start, let last = rest[..<end].last, ":,;.)".contains(last) {
                end = rest.index(before: end)
            }
            out += url(String(rest[start..<end]))
            rest = rest[end...]
        }
        return out + rest
    }

    private static func firstURL(in s: Substring) -> Substring.Index? {
        var best: Substring.Index?
        for scheme in schemes {
            var from = s.startIndex
            while let r = s[from...].range(of: scheme + "://", options: .caseInsensitive) {
                // Not the tail of a longer word (`xrtmp://`).
                if r.lowerBound == s.startIndex || !(s[s.index(before: r.lowerBound)].isLetter) {
                    if best == nil || r.lowerBound < best! { best = r.lowerBound }
                    break
                }
                from = r.upperBound
            }
        }
        return best
    }
}
