import Foundation
import Yams

/// Reads a `.pipe` file into `PipeValue`s that remember their line and column.
/// Anything unreadable becomes a diagnostic, never a crash: the size is capped, bytes are
/// checked for text, nesting depth is bounded and anchors are refused (`PipeScan`) before a tree
/// is built, and the tree is built on a thread with a large stack.
public enum PipeLoader {
    public static let maxFileBytes = 1 << 20
    public static let maxDepth = 64

    public static func load(path: String, displayName: String? = nil) -> (PipeValue?, [Diagnostic]) {
        let name = displayName ?? path
        let start = SourceLocation(file: name, line: 1, column: 1)
        // Non-blocking open, then only a regular file is read: a FIFO nobody writes to would
        // otherwise wait forever, and a device never end.
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let why = errno == ENOENT ? "no such file" : errno == EACCES ? "cannot read the file (permission denied)" : "cannot open the file: \(String(cString: strerror(errno)))"
            return (nil, [.error(start, why)])
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            let kind = info.st_mode & S_IFMT == S_IFDIR ? "a folder" : "not a regular file"
            return (nil, [.error(start, "\(kind), not a .pipe file")])
        }
        if info.st_size > maxFileBytes { return (nil, [tooBig(start)]) }
        let data = (try? handle.read(upToCount: maxFileBytes + 1)) ?? Data()
        if data.count > maxFileBytes { return (nil, [tooBig(start)]) }
        return parse(data: data, file: name)
    }

    static func tooBig(_ start: SourceLocation) -> Diagnostic {
        .error(start, "file is larger than \(maxFileBytes / 1024) KiB; a .pipe file describes a graph and is never this big",
               hint: "is this the right file?")
    }

    public static func parse(data: Data, file: String) -> (PipeValue?, [Diagnostic]) {
        let start = SourceLocation(file: file, line: 1, column: 1)
        if let nul = data.firstIndex(of: 0) {
            let loc = location(ofByte: nul - data.startIndex, in: data, file: file)
            return (nil, [.error(loc, "file holds binary data (a NUL byte), not YAML text")])
        }
        guard let text = String(data: data, encoding: .utf8) else {
            return (nil, [.error(location(ofByte: firstInvalidUTF8(data), in: data, file: file), "file is not valid UTF-8 text")])
        }
        if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            return (nil, [.error(start, "file is empty", hint: "a pipeline needs at least 'nodes:'")])
        }
        if let refused = PipeScan.refusal(text, file: file) {
            return (nil, [refused])
        }
        let parsed = ConditionLock<Result<PipeValue?, Diagnostic>?>(nil)
        let thread = Thread {
            let outcome: Result<PipeValue?, Diagnostic>
            do {
                let node = try Yams.compose(yaml: text, .basic)
                outcome = .success(try node.map { try convert($0, file: file) })
            } catch let refused as Diagnostic {
                outcome = .failure(refused)
            } catch {
                outcome = .failure(diagnostic(for: error, text: text, file: file))
            }
            parsed.withLockWakingAll { $0 = outcome }
        }
        thread.stackSize = 64 << 20
        thread.start()
        let outcome = parsed.wait { $0 }!
        if case .failure(let d) = outcome { return (nil, [d]) }
        guard case .success(let parsedValue) = outcome, let value = parsedValue else {
            return (nil, [.error(start, "file has no content (only comments or blank lines)", hint: "a pipeline needs at least 'nodes:'")])
        }
        return (value, [])
    }

    static func firstInvalidUTF8(_ data: Data) -> Int {
        var parser = Unicode.UTF8.ForwardParser()
        var bytes = data.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &bytes) {
            case .valid(let scalar): offset += scalar.count
            case .error: return offset
            case .emptyInput: return 0
            }
        }
    }

    static func location(ofByte offset: Int, in data: Data, file: String) -> SourceLocation {
        var line = 1, col = 1
        for b in data.prefix(offset) { if b == 10 { line += 1; col = 1 } else { col += 1 } }
        return SourceLocation(file: file, line: line, column: col)
    }

    /// Anchors and aliases are refused: Yams shares an aliased node, and a few hundred bytes of
    /// aliases of aliases would expand here into gigabytes (the "billion laughs"). A `.pipe` file
    /// is short enough to write out; the first anchor is reported before anything is copied.
    static func convert(_ node: Yams.Node, file: String) throws(Diagnostic) -> PipeValue {
        let loc = SourceLocation(file: file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1)
        if let anchor = node.anchor {
            throw .error(loc, "YAML anchors and aliases (&\(anchor.rawValue), *\(anchor.rawValue)) are not supported in a .pipe file",
                         hint: "write the value out where it is used")
        }
        switch node {
        case .scalar(let s): return .scalar(s.string, loc)
        case .sequence(let seq):
            var items: [PipeValue] = []
            items.reserveCapacity(seq.count)
            for item in seq { items.append(try convert(item, file: file)) }
            return .list(items, loc)
        case .mapping(let map):
            var entries: [PipeEntry] = []
            entries.reserveCapacity(map.count)
            for pair in map {
                let k = try convert(pair.key, file: file)
                entries.append(PipeEntry(key: k.scalar ?? "", keyLocation: k.location, value: try convert(pair.value, file: file)))
            }
            return .map(entries, loc)
        case .alias:
            throw .error(loc, "YAML aliases (*name) are not supported in a .pipe file", hint: "write the value out where it is used")
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
