import AVGraph
import Foundation

/// Where a sink sends its finished file (the `file` sink's `upload`): an HTTP(S) URL, the method,
/// extra headers, and how many attempts (with backoff between them) before the upload counts as failed.
public struct UploadTarget: OptionValueType {
    public var url: String
    public var method: String
    public var headers: [String: String]
    public var attempts: Int
    /// https: the authorities to trust (a PEM file) instead of the system's.
    public var caFile: String?

    public init(url: String, method: String = "PUT", headers: [String: String] = [:], attempts: Int = 3, caFile: String? = nil) {
        self.url = url
        self.method = method
        self.headers = headers
        self.attempts = attempts
        self.caFile = caFile
    }

    /// The URL for logs and events: no credentials, no query (a signed URL's signature).
    public var shownURL: String {
        guard var c = URLComponents(string: url) else { return "***" }
        if c.user != nil || c.password != nil { c.user = nil; c.password = nil }
        if c.query != nil { c.query = "***" }
        return c.string ?? "***"
    }

    public static let syntax = "{url: URL, method: PUT|POST, headers: {NAME: VALUE}, attempts: N, ca: FILE}"
    public static let example = "{url: https://host/path, method: PUT, headers: {Authorization: Bearer ...}, attempts: 3}"
    public static var schema: JSONValue {
        ["type": "object", "additionalProperties": false, "required": ["url"], "properties": [
            "url": ["type": "string", "pattern": "^https?://"], "method": ["enum": ["PUT", "POST", "put", "post"]],
            "headers": ["type": "object", "additionalProperties": ["type": ["string", "number"]]],
            "attempts": ["type": "integer", "minimum": 1, "maximum": 100], "ca": ["type": "string", "minLength": 1],
        ]]
    }

    /// Headers are left out: they carry credentials.
    public var text: String { "{url: \(shownURL), method: \(method), attempts: \(attempts)}" }

    /// `{url: ..., method: PUT|POST, headers: {NAME: VALUE}, attempts: N, ca: FILE}`; only `url` is needed.
    public static func parse(_ value: PipeValue) throws(ValueProblem) -> UploadTarget {
        guard let entries = value.entries else {
            throw ValueProblem(message: "expected a mapping like \(example), got \(value.shown)", hint: "write it like \(example)")
        }
        var target = UploadTarget(url: "")
        for e in entries {
            switch e.key {
            case "url":
                // `{part}` stands for a split recording's part number (the `file` sink puts it in).
                guard let s = e.value.scalar, let u = URLComponents(string: s.replacingOccurrences(of: "{part}", with: "001")), ["http", "https"].contains(u.scheme?.lowercased() ?? ""),
                      u.host?.isEmpty == false else {
                    throw ValueProblem(message: "upload url must be http:// or https:// with a host, got \(e.value.shown)", at: e.value.location)
                }
                target.url = s
            case "method":
                guard let s = e.value.scalar?.uppercased(), ["PUT", "POST"].contains(s) else {
                    throw ValueProblem(message: "upload method is PUT or POST, got \(e.value.shown)", at: e.value.location)
                }
                target.method = s
            case "attempts":
                guard let s = e.value.scalar, let n = Int(s), (1...100).contains(n) else {
                    throw ValueProblem(message: "attempts must be a count from 1 to 100, got \(e.value.shown)", at: e.value.location)
                }
                target.attempts = n
            case "ca":
                guard let s = e.value.scalar, !s.isEmpty else {
                    throw ValueProblem(message: "ca is a PEM file of trusted certificates, got \(e.value.shown)", at: e.value.location)
                }
                target.caFile = s
            case "headers":
                guard let hs = e.value.entries else {
                    throw ValueProblem(message: "headers must be a mapping like {Authorization: Bearer x}, got \(e.value.shown)", at: e.value.location)
                }
                for h in hs {
                    guard let v = h.value.scalar, !h.key.isEmpty,
                          !(h.key + v).contains(where: { $0 == "\r" || $0 == "\n" }), !h.key.contains(":") else {
                        throw ValueProblem(message: "header '\(h.key)' must be a name and a one-line value", at: h.value.location)
                    }
                    target.headers[h.key] = v
                }
            default:
                throw ValueProblem(message: "unknown key '\(e.key)'", hint: "use url, method, headers, attempts, ca", at: e.keyLocation)
            }
        }
        guard !target.url.isEmpty else { throw ValueProblem(message: "upload needs a url", hint: "write it like \(example)", at: value.location) }
        return target
    }
}
