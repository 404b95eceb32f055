/// A place in a `.pipe` file. Lines and columns count from 1.
public struct SourceLocation: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    public var description: String { "\(file):\(line):\(column)" }

    public static func < (a: SourceLocation, b: SourceLocation) -> Bool {
        (a.file, a.line, a.column) < (b.file, b.line, b.column)
    }
}

/// A YAML value with the place it was written, so every diagnostic can point at it.
public indirect enum PipeValue: Sendable {
    case scalar(String, SourceLocation)
    case list([PipeValue], SourceLocation)
    case map([PipeEntry], SourceLocation)

    public var location: SourceLocation {
        switch self {
        case .scalar(_, let l), .list(_, let l), .map(_, let l): return l
        }
    }

    public var scalar: String? { if case .scalar(let s, _) = self { return s } else { return nil } }
    public var list: [PipeValue]? { if case .list(let l, _) = self { return l } else { return nil } }
    public var entries: [PipeEntry]? { if case .map(let m, _) = self { return m } else { return nil } }

    public subscript(key: String) -> PipeValue? { entries?.first { $0.key == key }?.value }

    /// How the value reads in a message: a short quote of a scalar, or what kind of value it is.
    public var shown: String {
        switch self {
        case .scalar(let s, _): return Self.quoted(s)
        case .list: return "a list"
        case .map: return "a mapping"
        }
    }

    /// A short quote of a text for a message: a hostile file's megabyte-long word is cut.
    public static func quoted(_ s: String) -> String {
        s.utf8.count > 40 ? "'\(String(s.prefix(40)))…'" : "'\(s)'"
    }
}

public struct PipeEntry: Sendable {
    public var key: String
    public var keyLocation: SourceLocation
    public var value: PipeValue

    public init(key: String, keyLocation: SourceLocation, value: PipeValue) {
        self.key = key
        self.keyLocation = keyLocation
        self.value = value
    }
}
