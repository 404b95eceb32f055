/// A node's input or output, declared statically.
public struct PadSpec: Sendable {
    public var name: String
    public var kinds: Set<MediaKind>
    /// Takes any number of connections (`in: [app, mic]`).
    public var variadic: Bool
    /// Must be connected for the node to run.
    public var required: Bool
    public var doc: String

    public init(_ name: String, _ kinds: Set<MediaKind>, variadic: Bool = false, required: Bool = true, doc: String = "") {
        self.name = name
        self.kinds = kinds
        self.variadic = variadic
        self.required = required
        self.doc = doc
    }

    public var kindsText: String {
        MediaKind.allCases.filter { kinds.contains($0) }.map(\.rawValue).joined(separator: " | ")
    }
}
