/// An option value type a node declares itself, beside the built-in ones of `OptionType`: the
/// `screen` source's `region`, the `file` sink's `upload`, a plugin's own. `check` parses the
/// `.pipe` value with `parse` (a problem points at its place in the file), `inspect` shows
/// `syntax`, and `inspect --schema` gives editors `schema`.
///
///     public struct Aspect: OptionValueType {
///         public static let syntax = "W:H"
///         public static let example = "16:9"
///         public static var schema: JSONValue { ["type": "string", "pattern": "^[0-9]+:[0-9]+$"] }
///         public static func parse(_ value: PipeValue) throws(ValueProblem) -> Aspect { ... }
///         public var text: String { "\(width):\(height)" }
///     }
///     static let aspect = Setting.value("aspect", Aspect.self, doc: "...")   // read as Aspect?
public protocol OptionValueType: Sendable, Equatable {
    /// How `inspect`, docs/NODES.md and messages name the syntax (`x,y,WxH`).
    static var syntax: String { get }
    /// An example in the syntax, for hints (`0,0,1280x720`).
    static var example: String { get }
    /// How the value is written in a `.pipe`, as JSON Schema (draft-07), for `inspect --schema`.
    static var schema: JSONValue { get }
    /// Reads a `.pipe` value. A problem inside a mapping says where (`ValueProblem.at`); without
    /// a place, `check` reports it at the value.
    static func parse(_ value: PipeValue) throws(ValueProblem) -> Self
    /// The value as `ctl get` and messages show it (secrets masked).
    var text: String { get }
    /// The value in an `applied` event; by default its text.
    var eventValue: EventValue { get }
}

extension OptionValueType {
    public var eventValue: EventValue { .string(text) }
}

/// A parsed value of a node's own option type (`OptionValue.declared`).
public struct DeclaredValue: Sendable, Equatable {
    public let value: any OptionValueType

    public init(_ value: any OptionValueType) { self.value = value }

    public static func == (a: DeclaredValue, b: DeclaredValue) -> Bool { a.value.isEqual(to: b.value) }
}

extension OptionValueType {
    func isEqual(to other: any OptionValueType) -> Bool { (other as? Self).map { $0 == self } ?? false }
}

extension Setting {
    /// An option of a node's own value type: the given value, the default, or nil without either.
    public static func value<T: OptionValueType>(_ name: String, _ type: T.Type, default text: String? = nil, required: Bool = false,
                                                 live: Bool = false, doc: String) -> Self where Value == T? {
        Self(name, .declared(type), default: text, required: required, live: live, doc: doc, optional: nil) {
            guard case .declared(let d) = $0, let value = d.value as? T else { return nil }
            return value
        }
    }
}
