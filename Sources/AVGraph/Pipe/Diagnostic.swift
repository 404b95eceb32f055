/// One finding of `check` (or of a run's setup), GCC-style: `FILE:LINE:COL: error: MESSAGE`.
public struct Diagnostic: Sendable, Error, CustomStringConvertible {
    public enum Severity: String, Sendable, Comparable {
        case error, warning, note
        public static func < (a: Severity, b: Severity) -> Bool {
            let order: [Severity] = [.error, .warning, .note]
            return order.firstIndex(of: a)! < order.firstIndex(of: b)!
        }
    }

    public var severity: Severity
    public var location: SourceLocation
    public var message: String
    public var hint: String?

    public init(_ severity: Severity, at location: SourceLocation, _ message: String, hint: String? = nil) {
        self.severity = severity
        self.location = location
        self.message = message
        self.hint = hint
    }

    public static func error(_ location: SourceLocation, _ message: String, hint: String? = nil) -> Diagnostic {
        Diagnostic(.error, at: location, message, hint: hint)
    }

    public static func warning(_ location: SourceLocation, _ message: String, hint: String? = nil) -> Diagnostic {
        Diagnostic(.warning, at: location, message, hint: hint)
    }

    /// The GCC-style lines: the finding, then its hint as a note at the same place.
    public var description: String {
        var s = "\(location): \(severity.rawValue): \(message)"
        if let hint { s += "\n\(location): note: \(hint)" }
        return s
    }
}

/// `check --format json`'s shape: file, line, column, severity, message, hint.
extension Diagnostic: Encodable {
    enum Key: String, CodingKey { case file, line, column, severity, message, hint }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(location.file, forKey: .file)
        try c.encode(location.line, forKey: .line)
        try c.encode(location.column, forKey: .column)
        try c.encode(severity.rawValue, forKey: .severity)
        try c.encode(message, forKey: .message)
        try c.encodeIfPresent(hint, forKey: .hint)
    }
}

/// Suggests the closest known word for a misspelt one (`bitrat` -> `bitrate`).
public enum Suggest {
    public static func closest(to word: String, in candidates: [String]) -> String? {
        // A misspelling is a short word; a long one (a hostile file's megabyte key) has no match.
        guard word.utf8.count <= 64 else { return nil }
        let w = Array(word.lowercased())
        var best: (String, Int)?
        for c in candidates where c.utf8.count <= 64 {
            let limit = max(1, min(3, c.count / 3 + 1))
            // The distance is at least the difference in length: skip the table when that is too far.
            guard abs(c.count - w.count) <= limit else { continue }
            let d = distance(w, Array(c.lowercased()))
            if d <= limit, best == nil || d < best!.1 { best = (c, d) }
        }
        return best?.0
    }

    public static func hint(for word: String, in candidates: [String]) -> String? {
        closest(to: word, in: candidates).map { "did you mean '\($0)'?" }
    }

    /// Optimal string alignment distance (edits plus swaps of neighbours).
    static func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
