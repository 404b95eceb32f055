import Foundation

/// A JSON document in its own type, written as Swift literals (`["type": "integer", "minimum": 1]`):
/// how `inspect --schema` builds the `.pipe` schema and `inspect --control-schema` the control one.
/// Encodes as the JSON it spells.
package indirect enum JSONValue: Encodable, Equatable, Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    case null
    case bool(Bool)
    case int(Int)
    case number(Double)
    case string(String)
    case list([JSONValue])
    case object([String: JSONValue])

    package init(stringLiteral value: String) { self = .string(value) }
    package init(integerLiteral value: Int) { self = .int(value) }
    package init(floatLiteral value: Double) { self = .number(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(arrayLiteral elements: JSONValue...) { self = .list(elements) }
    package init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last })) }

    package static func strings(_ list: [String]) -> JSONValue { .list(list.map(JSONValue.string)) }

    /// A member of an object (nil for anything else); setting one on a non-object does nothing.
    package subscript(key: String) -> JSONValue? {
        get { if case .object(let o) = self { o[key] } else { nil } }
        set {
            guard case .object(var o) = self else { return }
            o[key] = newValue
            self = .object(o)
        }
    }

    package func encode(to encoder: any Swift.Encoder) throws {
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
    package var members: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }

    /// A list of strings' strings (nil for anything else).
    package var strings: [String]? {
        guard case .list(let l) = self else { return nil }
        return l.compactMap { if case .string(let s) = $0 { s } else { nil } }
    }

    /// The value as an event's value (nil for `null`, which no event value spells).
    package var eventValue: EventValue? {
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
