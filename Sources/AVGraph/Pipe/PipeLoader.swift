import Foundation
import Yams

/// Reads a `.pipe` file into `PipeValue`s that remember their line and column.
/// Anything unreadable becomes a diagnostic, never a crash: the size is capped, bytes are
/// checked for text, nesting depth is bounded before the YAML parser sees the file, and
/// parsing runs on a thread with a large stack.
public enum PipeLoader {
    public static let maxFileBytes = 1 << 20
    public static let maxDepth = 64

    public static func load(path: String, displayName: String? = nil) -> (PipeValue?, [Diagnostic]) {
        let name = displayName ?? path
        let start = SourceLocation(file: name, line: 1, column: 1)
        guard let handle = FileHandle(forReadingAtPath: path) else {
            let exists = FileManager.default.fileExists(atPath: path)
            return (nil, [.error(start, exists ? "cannot read the file (permission denied?)" : "no such file")])
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: maxFileBytes + 1)) ?? Data()
        if data.count > maxFileBytes {
            return (nil, [.error(start, "file is larger than \(maxFileBytes / 1024) KiB; a .pipe file describes a graph and is never this big",
                                 hint: "is this the right file?")])
        }
        return parse(data: data, file: name)
    }

    public static func parse(data: Data, file: String) -> (PipeValue?, [Diagnostic]) {
        let start = SourceLocation(file: file, line: 1, column: 1)
        if let nul = data.firstIndex(of: 0) {
            let loc = location(ofByte: nul - data.startIndex, in: data, file: file)
            return (nil, [.error(loc, "file holds binary data (a NUL byte), not YAML text")])
        }
        guard let text = String(data: data, encoding: .utf8) else {
            return (nil, [.error(start, "file is not valid UTF-8 text")])
        }
        if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            return (nil, [.error(start, "file is empty", hint: "a pipeline needs at least 'nodes:'")])
        }
        if let deep = tooDeep(text, file: file) {
            return (nil, [deep])
        }
        let result = ParseBox()
        let thread = Thread {
            do {
                let node = try Yams.compose(yaml: text, .basic)
                result.value = node.map { convert($0, file: file) }
            } catch {
                result.diagnostic = diagnostic(for: error, text: text, file: file)
            }
            result.done.signal()
        }
        thread.stackSize = 64 << 20
        thread.start()
        result.done.wait()
        if let d = result.diagnostic { return (nil, [d]) }
        guard let value = result.value else {
            return (nil, [.error(start, "file has no content (only comments or blank lines)", hint: "a pipeline needs at least 'nodes:'")])
        }
        return (value, [])
    }

    private final class ParseBox: @unchecked Sendable {
        var value: PipeValue?
        var diagnostic: Diagnostic?
        let done = DispatchSemaphore(value: 0)
    }

    /// Flow brackets and block indentation both nest; more than `maxDepth` is refused at the place it happens.
    static func tooDeep(_ text: String, file: String) -> Diagnostic? {
        var depth = 0, line = 1, col = 0
        var inQuote: Character? = nil
        var lineStart = true, indentDepth = 0
        for ch in text {
            col += 1
            if ch == "\n" { line += 1; col = 0; lineStart = true; indentDepth = 0; inQuote = nil; continue }
            if let q = inQuote { if ch == q { inQuote = nil }; continue }
            if lineStart {
                if ch == " " || ch == "-" { if ch == "-" { indentDepth += 1 }; if col / 2 + indentDepth > maxDepth * 2 { return deepError(line, col, file) }; continue }
                lineStart = false
            }
            switch ch {
            case "\"", "'": inQuote = ch
            case "#": inQuote = "\n"
            case "[", "{":
                depth += 1
                if depth > maxDepth { return deepError(line, col, file) }
            case "]", "}": depth = max(0, depth - 1)
            default: break
            }
        }
        return nil
    }

    private static func deepError(_ line: Int, _ col: Int, _ file: String) -> Diagnostic {
        .error(SourceLocation(file: file, line: line, column: col), "nesting is deeper than \(maxDepth) levels",
               hint: "a .pipe file needs only a few levels: nodes, options, schedules")
    }

    static func location(ofByte offset: Int, in data: Data, file: String) -> SourceLocation {
        var line = 1, col = 1
        for b in data.prefix(offset) { if b == 10 { line += 1; col = 1 } else { col += 1 } }
        return SourceLocation(file: file, line: line, column: col)
    }

    static func convert(_ node: Yams.Node, file: String) -> PipeValue {
        let loc = SourceLocation(file: file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1)
        switch node {
        case .scalar(let s): return .scalar(s.string, loc)
        case .sequence(let seq): return .list(seq.map { convert($0, file: file) }, loc)
        case .mapping(let map):
            return .map(map.map { pair in
                let k = convert(pair.key, file: file)
                return PipeEntry(key: k.scalar ?? "", keyLocation: k.location, value: convert(pair.value, file: file))
            }, loc)
        case .alias: return .scalar("", loc)
        }
    }

    static func diagnostic(for error: Error, text: String, file: String) -> Diagnostic {
        guard let y = error as? YamlError else {
            return .error(SourceLocation(file: file, line: 1, column: 1), "YAML: \(error)")
        }
        func at(_ m: Mark) -> SourceLocation { SourceLocation(file: file, line: max(m.line, 1), column: max(m.column, 1)) }
        switch y {
        case .scanner(let ctx, let problem, let mark, _), .parser(let ctx, let problem, let mark, _), .composer(let ctx, let problem, let mark, _):
            var message = "YAML syntax: \(problem)"
            if let ctx { message += " (\(ctx.text))" }
            return .error(at(mark), message)
        case .reader(let problem, let offset, _, _):
            let loc = offset.map { location(ofByte: $0, in: Data(text.utf8), file: file) } ?? SourceLocation(file: file, line: 1, column: 1)
            return .error(loc, "YAML: \(problem)")
        case .duplicatedKeysInMapping(let keys, let ctx):
            let key = keys.first ?? ""
            let second = secondOccurrence(of: key, in: text, after: ctx.mark.line) ?? (ctx.mark.line, ctx.mark.column)
            return .error(SourceLocation(file: file, line: second.line, column: second.column),
                          "duplicate key '\(key)': it is already defined at line \(ctx.mark.line)",
                          hint: "names in a mapping must be unique; rename one of them")
        default:
            return .error(SourceLocation(file: file, line: 1, column: 1), "YAML: \(y)")
        }
    }

    /// Yams reports a duplicate at the first key; the mistake is the repeat, so point there.
    static func secondOccurrence(of key: String, in text: String, after line: Int) -> (line: Int, column: Int)? {
        for (i, l) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where i + 1 > line {
            let trimmed = l.drop { $0 == " " }
            for candidate in [key + ":", "\"\(key)\":", "'\(key)':"] where trimmed.hasPrefix(candidate) {
                return (i + 1, l.count - trimmed.count + 1)
            }
            if let r = l.range(of: " \(key):") ?? l.range(of: "{\(key):") {
                return (i + 1, l.distance(from: l.startIndex, to: r.lowerBound) + 2)
            }
        }
        return nil
    }
}
