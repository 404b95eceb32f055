import Foundation

/// AMF0, the encoding of RTMP's commands (`connect`, `publish`...) and data messages
/// (`@setDataFrame`/`onMetaData`): just what a publisher sends and the server answers.
package enum Amf0Value: Equatable, Sendable {
    case number(Double)
    case bool(Bool)
    case string(String)
    /// An object or ECMA array: name/value pairs in the order sent.
    case object([Amf0Pair])
    case array([Amf0Value])
    case null
    case undefined

    package var string: String? { if case .string(let s) = self { s } else { nil } }
    package var number: Double? { if case .number(let n) = self { n } else { nil } }
    package subscript(_ name: String) -> Amf0Value? {
        guard case .object(let pairs) = self else { return nil }
        return pairs.first { $0.name == name }?.value
    }
}

package struct Amf0Pair: Equatable, Sendable {
    package var name: String
    package var value: Amf0Value
}

package struct Amf0Error: Error, CustomStringConvertible {
    package var description: String
}

package enum Amf0 {
    /// Nesting deeper than this is refused: no publisher needs it, and a hostile one must not
    /// run the decoder's recursion out of stack.
    package static let maxDepth = 16

    /// Every value in `bytes`, in order (a command: name, transaction id, object, arguments).
    package static func decodeAll(_ bytes: ArraySlice<UInt8>) throws(Amf0Error) -> [Amf0Value] {
        var reader = Reader(bytes: bytes)
        var values: [Amf0Value] = []
        while !reader.atEnd { values.append(try reader.value(depth: 0)) }
        return values
    }

    /// The first value, when it is a string (a data message's name), else nil.
    package static func leadingString(_ bytes: ArraySlice<UInt8>) -> String? {
        var reader = Reader(bytes: bytes)
        return (try? reader.value(depth: maxDepth))?.string
    }

    package struct Reader {
        package let bytes: ArraySlice<UInt8>
        package var index: Int
        package init(bytes: ArraySlice<UInt8>) { self.bytes = bytes; index = bytes.startIndex }
        package var atEnd: Bool { index >= bytes.endIndex }
        /// Bytes consumed so far.
        package var offset: Int { index - bytes.startIndex }

        package mutating func take(_ n: Int) throws(Amf0Error) -> ArraySlice<UInt8> {
            guard n >= 0, bytes.endIndex - index >= n else { throw Amf0Error(description: "AMF0 value cut short") }
            defer { index += n }
            return bytes[index..<index + n]
        }

        package mutating func uint(_ n: Int) throws(Amf0Error) -> UInt32 {
            try take(n).reduce(0) { $0 << 8 | UInt32($1) }
        }

        package mutating func utf8(_ n: Int) throws(Amf0Error) -> String {
            String(decoding: try take(n), as: UTF8.self)
        }

        package mutating func value(depth: Int) throws(Amf0Error) -> Amf0Value {
            guard depth <= Amf0.maxDepth else { throw Amf0Error(description: "AMF0 nested too deep") }
            let marker = try take(1).first!
            switch marker {
            case 0x00: return .number(Double(bitPattern: UInt64(try uint(4)) << 32 | UInt64(try uint(4))))
            case 0x01: return .bool(try take(1).first! != 0)
            case 0x02: return .string(try utf8(Int(try uint(2))))
            case 0x0C: return .string(try utf8(Int(try uint(4))))
            case 0x03: return .object(try pairs(depth: depth))
            case 0x08:
                _ = try uint(4)  // the count is a hint; the end marker ends it
                return .object(try pairs(depth: depth))
            case 0x0A:
                let count = Int(try uint(4))
                // Each value takes a byte at least: a count past the bytes left is a lie.
                guard count <= bytes.endIndex - index else { throw Amf0Error(description: "AMF0 array longer than its message") }
                var items: [Amf0Value] = []
                for _ in 0..<count { items.append(try value(depth: depth + 1)) }
                return .array(items)
            case 0x05: return .null
            case 0x06: return .undefined
            case 0x0B:
                _ = try take(10)  // date: a number and a time zone
                return .undefined
            default: throw Amf0Error(description: "AMF0 type \(marker) not supported")
            }
        }

        package mutating func pairs(depth: Int) throws(Amf0Error) -> [Amf0Pair] {
            var out: [Amf0Pair] = []
            while true {
                let name = try utf8(Int(try uint(2)))
                if name.isEmpty, bytes.endIndex > index, bytes[index] == 0x09 {
                    index += 1
                    return out
                }
                out.append(Amf0Pair(name: name, value: try value(depth: depth + 1)))
            }
        }
    }

    package static func encode(_ values: [Amf0Value]) -> [UInt8] {
        var out: [UInt8] = []
        for v in values { append(v, to: &out) }
        return out
    }

    private static func append(_ value: Amf0Value, to out: inout [UInt8]) {
        func string(_ s: String) {
            let b = Array(s.utf8.prefix(0xFFFF))
            out += [UInt8(b.count >> 8), UInt8(b.count & 0xFF)] + b
        }
        switch value {
        case .number(let d):
            out.append(0x00)
            let bits = d.bitPattern
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        case .bool(let b): out += [0x01, b ? 1 : 0]
        case .string(let s):
            out.append(0x02)
            string(s)
        case .object(let pairs):
            out.append(0x03)
            for p in pairs {
                string(p.name)
                append(p.value, to: &out)
            }
            out += [0x00, 0x00, 0x09]
        case .array(let items):
            out.append(0x0A)
            let n = UInt32(items.count)
            out += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
            for i in items { append(i, to: &out) }
        case .null: out.append(0x05)
        case .undefined: out.append(0x06)
        }
    }
}
