import Foundation

/// What a `Decodable` type's schema needs beyond what its `init(from:)` asks for: a sentence on
/// the whole, and per JSON key the keywords a decoder cannot see (a range, a constant, a description).
public protocol SchemaAnnotated {
    static var schemaDescription: String? { get }
    /// Per JSON key, JSON Schema keywords put over what the decoder saw (`["minimum": .int(0)]`).
    static var schemaKeywords: [String: [String: EventValue]] { get }
}

extension SchemaAnnotated {
    public static var schemaDescription: String? { nil }
    public static var schemaKeywords: [String: [String: EventValue]] { [:] }
}

/// The JSON Schema of a `Decodable` type, read off its own `init(from:)`: the type is decoded once
/// from a decoder that answers every question with a placeholder and notes each key asked for, its
/// type, and whether it was asked with `contains`/`decodeIfPresent` (optional) or not (required).
/// So a field added to a reply type is in the schema without anyone writing it there.
package enum DecodableSchema {
    package static func of(_ type: any Decodable.Type) -> JSONValue {
        let shape = Shape(notes: type as? any SchemaAnnotated.Type)
        // A decoder that refuses a placeholder after reading some keys still told us those keys.
        try? Recorder(shape, depth: 0).note(type, into: shape)
        return shape.schema
    }

    /// What one decoded value looked like.
    final class Shape {
        let notes: (any SchemaAnnotated.Type)?
        var fixed: JSONValue?
        var keys: [(name: String, shape: Shape)] = []
        var optional: Set<String> = []
        var items: Shape?

        init(notes: (any SchemaAnnotated.Type)? = nil, fixed: JSONValue? = nil) {
            self.notes = notes
            self.fixed = fixed
        }

        func key(_ name: String, _ shape: Shape) {
            keys.removeAll { $0.name == name }
            keys.append((name, shape))
        }

        var schema: JSONValue {
            var s: JSONValue
            if let fixed {
                s = fixed
            } else if let items {
                s = ["type": "array", "items": items.schema]
            } else if !keys.isEmpty {
                var properties: [String: JSONValue] = [:]
                for (name, shape) in keys {
                    var p = shape.schema
                    for (keyword, value) in notes?.schemaKeywords[name] ?? [:] { p[keyword] = JSONValue(value) }
                    properties[name] = p
                }
                s = ["type": "object", "properties": .object(properties), "additionalProperties": false]
                let required = keys.map(\.name).filter { !optional.contains($0) }
                if !required.isEmpty { s["required"] = .strings(required) }
            } else {
                s = ["type": "object", "additionalProperties": false]
            }
            if let doc = notes?.schemaDescription { s["description"] = .string(doc) }
            return s
        }
    }

    /// Any JSON value (`EventValue`: a `set`'s value, a request's `id`).
    static let anyValue: JSONValue = ["type": .strings(["string", "number", "boolean", "array", "object"])]

    struct Recorder: Swift.Decoder {
        let shape: Shape
        let depth: Int
        init(_ shape: Shape, depth: Int) {
            self.shape = shape
            self.depth = depth
        }
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        func container<Key: CodingKey>(keyedBy: Key.Type) throws -> KeyedDecodingContainer<Key> { .init(Keyed(recorder: self)) }
        func unkeyedContainer() throws -> any UnkeyedDecodingContainer { Unkeyed(recorder: self) }
        func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(recorder: self) }

        /// A placeholder `T`, its shape noted in `into`.
        func value<T: Decodable>(_ type: T.Type, into: Shape) throws -> T {
            if type == EventValue.self {
                into.fixed = DecodableSchema.anyValue
                return EventValue.int(0) as! T
            }
            if type == Bool.self { into.fixed = ["type": "boolean"]; return false as! T }
            if type == String.self { into.fixed = ["type": "string"]; return "" as! T }
            if let i = type as? any BinaryInteger.Type { into.fixed = ["type": "integer"]; return i.init(0) as! T }
            if let f = type as? any BinaryFloatingPoint.Type { into.fixed = ["type": "number"]; return f.init(0) as! T }
            if let map = type as? any StringKeyedMap.Type {
                let values = Shape(notes: map.valueType as? any SchemaAnnotated.Type)
                try? Recorder(values, depth: depth + 1).note(map.valueType, into: values)
                into.fixed = ["type": "object", "additionalProperties": values.schema]
                return map.empty as! T
            }
            guard depth < 24 else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "nested too deep for a schema")) }
            return try T(from: Recorder(into, depth: depth + 1))
        }

        /// `type`'s shape noted in `into`, for a type known only at run time.
        func note(_ type: any Decodable.Type, into: Shape) throws {
            func open<T: Decodable>(_ t: T.Type) throws { _ = try value(t, into: into) }
            try open(type)
        }

        /// A key's shape: the annotations are the value type's own.
        func child<T>(_ type: T.Type) -> Shape { Shape(notes: type as? any SchemaAnnotated.Type) }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let recorder: Recorder
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }
        /// Asked only of a key that may be absent: so the key is optional.
        func contains(_ key: Key) -> Bool {
            recorder.shape.optional.insert(key.stringValue)
            return true
        }
        func decodeNil(forKey key: Key) throws -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            let shape = recorder.child(type)
            recorder.shape.key(key.stringValue, shape)
            return try recorder.value(type, into: shape)
        }
        func nestedContainer<NestedKey: CodingKey>(keyedBy: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            let shape = Shape()
            recorder.shape.key(key.stringValue, shape)
            return .init(Keyed<NestedKey>(recorder: Recorder(shape, depth: recorder.depth + 1)))
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            let shape = Shape()
            recorder.shape.key(key.stringValue, shape)
            return Unkeyed(recorder: Recorder(shape, depth: recorder.depth + 1))
        }
        func superDecoder() throws -> any Swift.Decoder { recorder }
        func superDecoder(forKey key: Key) throws -> any Swift.Decoder {
            let shape = Shape()
            recorder.shape.key(key.stringValue, shape)
            return Recorder(shape, depth: recorder.depth + 1)
        }
    }

    /// An array: one element is decoded, then it says it is at its end.
    struct Unkeyed: UnkeyedDecodingContainer {
        let recorder: Recorder
        var codingPath: [any CodingKey] { [] }
        var count: Int? { nil }
        var isAtEnd: Bool { recorder.shape.items != nil }
        var currentIndex: Int { isAtEnd ? 1 : 0 }
        mutating func decodeNil() throws -> Bool { false }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let shape = recorder.child(type)
            recorder.shape.items = shape
            return try recorder.value(type, into: shape)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let shape = Shape()
            recorder.shape.items = shape
            return .init(Keyed<NestedKey>(recorder: Recorder(shape, depth: recorder.depth + 1)))
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let shape = Shape()
            recorder.shape.items = shape
            return Unkeyed(recorder: Recorder(shape, depth: recorder.depth + 1))
        }
        mutating func superDecoder() throws -> any Swift.Decoder { recorder }
    }

    struct Single: SingleValueDecodingContainer {
        let recorder: Recorder
        var codingPath: [any CodingKey] { [] }
        func decodeNil() -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try recorder.value(type, into: recorder.shape) }
    }
}

/// A dictionary keyed by strings: a JSON object whose keys are data, not fields.
protocol StringKeyedMap {
    static var valueType: any Decodable.Type { get }
    static var empty: Self { get }
}

extension Dictionary: StringKeyedMap where Key == String, Value: Decodable {
    static var valueType: any Decodable.Type { Value.self }
    static var empty: Self { [:] }
}

extension JSONValue {
    /// Notes written as `EventValue`s, which is what a public annotation can spell.
    init(_ value: EventValue) {
        switch value {
        case .bool(let b): self = .bool(b)
        case .int(let i): self = .int(i)
        case .number(let d): self = .number(d)
        case .string(let s): self = .string(s)
        case .list(let l): self = .list(l.map(JSONValue.init))
        case .object(let o): self = .object(o.mapValues(JSONValue.init))
        }
    }
}
