import Foundation

/// The `{NAME}` placeholders `avgraph serve` fills in its template for each run. `{part}` is not
/// among them: the `file` sink fills it, part by part.
public enum TemplatePlaceholders {
    public static let names = ["key", "app", "session", "start"]

    /// `text` with each `{NAME}` of `values` replaced; values are made safe for a file name and a
    /// YAML scalar first (a key comes from the network).
    public static func fill(_ text: String, _ values: [String: String]) -> String {
        var out = text
        for (name, value) in values { out = out.replacingOccurrences(of: "{\(name)}", with: safe(value)) }
        return out
    }

    /// Letters, digits, `.`, `-` and `_` kept, anything else `_`; never empty, never `.` or `..`.
    public static func safe(_ value: String) -> String {
        let kept = String(value.unicodeScalars.prefix(96).map { s in
            (s.isASCII && (CharacterSet.alphanumerics.contains(s) || s == "-" || s == "_" || s == ".")) ? Character(s) : "_"
        })
        return kept.isEmpty || kept.allSatisfy({ $0 == "." }) ? "_" + kept : kept
    }

    /// `{start}`: UTC, `YYYYmmdd-HHMMSS`.
    public static func stamp(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyyMMdd-HHmmss"
        return f.string(from: date)
    }
}
