import Foundation
import Synchronization

/// An event kind a node type declares (`Node.events`) and emits (`out.event(MyEvent(...))`), a
/// built-in type's (AVGraphNodes) or a plugin's. The runtime knows none of them by name: it
/// writes each as a flat JSON line (`event`, `wall`, `node`, then the payload's own fields), and
/// `avgraph inspect --events-schema` describes it from `fields` (docs/events.schema.json).
///
///     public struct Beat: NodeEvent {
///         public static let eventName = "beat"
///         public static let summary = "A beat was heard at media_time."
///         public static let fields: [EventField] = [.number("media_time"), .number("strength", minimum: 0)]
///         public static let example = Beat(mediaTime: 1.5, strength: 0.8)
///         public var mediaTime: Double, strength: Double
///         enum CodingKeys: String, CodingKey { case mediaTime = "media_time", strength }
///         public var text: String { "beat at \(mediaTime) s" }
///     }
///
/// `fields` must say what `encode(to:)` writes, key for key: EventSchemaTests validates every
/// declared kind's `example` against the generated schema, which refuses unknown keys.
public protocol NodeEvent: EventPayload {
    /// How much a person watching the run needs it (stderr shows `info` with `-v`); default `info`.
    static var severity: Event.Severity { get }
    /// The event as a person reads it, without the node (the reader prefixes that).
    var text: String { get }
}

extension NodeEvent {
    public static var severity: Event.Severity { .info }
    public static var node: EventField.Presence { .required }
}

/// One JSON field of an event line, as docs/events.schema.json describes it.
public struct EventField: Sendable {
    /// Whether a line of a kind carries the field.
    public enum Presence: Sendable { case required, optional, absent }

    public var name: String
    /// The field's JSON Schema (`{"type": "integer", "minimum": 0}`).
    public var schema: JSONValue
    public var required: Bool

    public init(_ name: String, _ schema: JSONValue, required: Bool = true, doc: String? = nil) {
        self.name = name
        self.schema = schema
        self.required = required
        if let doc { self.schema["description"] = .string(doc) }
    }

    public static func integer(_ name: String, minimum: Int? = 0, maximum: Int? = nil, required: Bool = true, doc: String? = nil) -> Self {
        Self(name, Self.integer(minimum: minimum, maximum: maximum), required: required, doc: doc)
    }
    public static func number(_ name: String, minimum: Double? = nil, required: Bool = true, doc: String? = nil) -> Self {
        Self(name, Self.number(minimum: minimum), required: required, doc: doc)
    }
    public static func string(_ name: String, required: Bool = true, doc: String? = nil) -> Self {
        Self(name, ["type": "string"], required: required, doc: doc)
    }
    public static func boolean(_ name: String, required: Bool = true, doc: String? = nil) -> Self {
        Self(name, ["type": "boolean"], required: required, doc: doc)
    }
    /// One of fixed words (a Swift enum's raw values).
    public static func choice(_ name: String, _ words: [String], required: Bool = true, doc: String? = nil) -> Self {
        Self(name, ["enum": .strings(words)], required: required, doc: doc)
    }
    /// A list whose items each have the schema `items` (`EventField.integer()`, `["type": "string"]`).
    public static func list(_ name: String, of items: JSONValue, required: Bool = true, doc: String? = nil) -> Self {
        Self(name, ["type": "array", "items": items], required: required, doc: doc)
    }

    /// The schema of an integer, for list items and nested objects.
    public static func integer(minimum: Int? = 0, maximum: Int? = nil) -> JSONValue {
        var s: JSONValue = ["type": "integer"]
        if let minimum { s["minimum"] = .int(minimum) }
        if let maximum { s["maximum"] = .int(maximum) }
        return s
    }
    public static func number(minimum: Double? = nil) -> JSONValue {
        var s: JSONValue = ["type": "number"]
        if let minimum { s["minimum"] = minimum == minimum.rounded() ? .int(Int(minimum)) : .number(minimum) }
        return s
    }

    /// An object of these fields and no others (a nested part of a payload).
    public static func object(_ fields: [EventField]) -> JSONValue {
        ["type": "object", "properties": .object(Dictionary(fields.map { ($0.name, $0.schema) }, uniquingKeysWith: { a, _ in a })),
         "required": .strings(fields.filter(\.required).map(\.name)), "additionalProperties": false]
    }
}

/// The node-declared event kinds this process has met, by `event` name: how a JSON line of one
/// decodes back into its Swift type (`Event.decode(line:)`). Registering a node type adds its
/// kinds; emitting one adds it too, so a harness reads back what a node it never registered emitted.
public enum EventCatalog {
    private static let kinds = Mutex<[String: any NodeEvent.Type]>([:])

    /// Adds `type` under its name unless a kind of that name is known already (the first stays).
    public static func note(_ type: any NodeEvent.Type) {
        kinds.withLock { k in
            if k[type.eventName] == nil { k[type.eventName] = type }
        }
    }

    public static func kind(named name: String) -> (any NodeEvent.Type)? { kinds.withLock { $0[name] } }
}

/// A node's event of a kind this process does not know: its `event` name and the line's own
/// fields (all but `event`, `wall` and `node`), which it encodes back unchanged.
public struct UndeclaredEvent: EventPayload, Equatable {
    public static let eventName = "undeclared"
    public static let summary = "A node's event of a kind no type known to this process declares."
    public static var fields: [EventField] { [] }
    public static var node: EventField.Presence { .required }
    public static var example: Self { Self(name: "beat", fields: ["picture": .int(7)]) }

    public var name: String
    public var fields: [String: EventValue]

    public init(name: String, fields: [String: EventValue]) {
        self.name = name
        self.fields = fields
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        name = try c.decode(String.self, forKey: Key(stringValue: "event"))
        fields = [:]
        for key in c.allKeys where !["event", "wall", "node"].contains(key.stringValue) {
            fields[key.stringValue] = try c.decode(EventValue.self, forKey: key)
        }
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        for (key, value) in fields { try c.encode(value, forKey: Key(stringValue: key)) }
    }

    /// The event as the kind `type` declares it, when it is that kind and its fields fit.
    public func declared<T: NodeEvent>(_ type: T.Type) -> T? {
        guard name == T.eventName, let data = try? JSONEncoder().encode(self) else { return nil }
        return try? JSONDecoder().decode(T.self, from: data)
    }
}
