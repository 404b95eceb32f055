import Foundation

/// A JSON document in its own type, written as Swift literals (`["type": "integer", "minimum": 1]`):
/// how `inspect --schema` builds the `.pipe` schema, and how a node's option types and event kinds
/// describe themselves in it and in docs/events.schema.json. Encodes as the JSON it spells.
public indirect enum JSONValue: Encodable, Equatable, Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    case null
    case bool(Bool)
    case int(Int)
    case number(Double)
    case string(String)
    case list([JSONValue])
    case object([String: JSONValue])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .list(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last })) }

    public static func strings(_ list: [String]) -> JSONValue { .list(list.map(JSONValue.string)) }

    /// A member of an object (nil for anything else); setting one on a non-object does nothing.
    public subscript(key: String) -> JSONValue? {
        get { if case .object(let o) = self { o[key] } else { nil } }
        set {
            guard case .object(var o) = self else { return }
            o[key] = newValue
            self = .object(o)
        }
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .number(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .list(let l): try c.encode(l)
        case .object(let o): try c.encode(o)
        }
    }
}

extension JSONValue {
    /// An object's members (nil for anything else).
    public var members: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }

    /// A list of strings' strings (nil for anything else).
    public var strings: [String]? {
        guard case .list(let l) = self else { return nil }
        return l.compactMap { if case .string(let s) = $0 { s } else { nil } }
    }

    /// The value as an event's value (nil for `null`, which no event value spells).
    public var eventValue: EventValue? {
        switch self {
        case .null: nil
        case .bool(let b): .bool(b)
        case .int(let i): .int(i)
        case .number(let d): .number(d)
        case .string(let s): .string(s)
        case .list(let l): .list(l.compactMap(\.eventValue))
        case .object(let o): .object(o.compactMapValues(\.eventValue))
        }
    }
}
