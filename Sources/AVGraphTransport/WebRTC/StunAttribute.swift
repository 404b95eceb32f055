/// One STUN attribute: its type and value (without padding), and where it began in the message
/// it was read from (for the integrity checks, which cover the bytes before it).
package struct StunAttribute: Equatable, Sendable {
    package static let mappedAddress: UInt16 = 0x0001
    package static let username: UInt16 = 0x0006
    package static let messageIntegrity: UInt16 = 0x0008
    package static let errorCode: UInt16 = 0x0009
    package static let xorMappedAddress: UInt16 = 0x0020
    package static let priority: UInt16 = 0x0024
    package static let useCandidate: UInt16 = 0x0025
    package static let software: UInt16 = 0x8022
    package static let fingerprint: UInt16 = 0x8028
    package static let iceControlled: UInt16 = 0x8029
    package static let iceControlling: UInt16 = 0x802A

    package var type: UInt16
    package var value: [UInt8]
    package var offset: Int?

    package init(type: UInt16, value: [UInt8], offset: Int? = nil) {
        self.type = type
        self.value = value
        self.offset = offset
    }

    package static func == (a: StunAttribute, b: StunAttribute) -> Bool { a.type == b.type && a.value == b.value }

    package static func text(_ type: UInt16, _ s: String) -> StunAttribute { StunAttribute(type: type, value: Array(s.utf8)) }

    package var text: String? { String(validating: value, as: UTF8.self) }

    /// XOR-MAPPED-ADDRESS for `address` (4 bytes IPv4 or 16 bytes IPv6) and `port`.
    package static func xorMapped(address: [UInt8], port: UInt16, transactionID: [UInt8]) -> StunAttribute {
        let mask = [0x21, 0x12, 0xA4, 0x42] + transactionID
        let xport = port ^ 0x2112
        var value: [UInt8] = [0, address.count == 4 ? 1 : 2, UInt8(xport >> 8), UInt8(xport & 0xFF)]
        for (i, b) in address.enumerated() { value.append(b ^ mask[i]) }
        return StunAttribute(type: xorMappedAddress, value: value)
    }

    /// The address and port of an XOR-MAPPED-ADDRESS value; nil when malformed.
    package func xorMappedAddress(transactionID: [UInt8]) -> (address: [UInt8], port: UInt16)? {
        guard value.count >= 4 else { return nil }
        let family = value[1], length = family == 1 ? 4 : family == 2 ? 16 : 0
        guard length > 0, value.count == 4 + length else { return nil }
        let mask = [0x21, 0x12, 0xA4, 0x42] + transactionID
        let port = (UInt16(value[2]) << 8 | UInt16(value[3])) ^ 0x2112
        return (value[4...].enumerated().map { $0.element ^ mask[$0.offset] }, port)
    }

    /// ERROR-CODE with `code` (300-699) and its reason.
    package static func error(_ code: Int, _ reason: String) -> StunAttribute {
        StunAttribute(type: errorCode, value: [0, 0, UInt8(code / 100), UInt8(code % 100)] + Array(reason.utf8))
    }

    /// `padding`: RFC 5769's test vectors pad with spaces; a receiver ignores the padding's bytes.
    func append(to out: inout [UInt8], padding: UInt8 = 0) {
        out += [UInt8(type >> 8), UInt8(type & 0xFF), UInt8(value.count >> 8), UInt8(value.count & 0xFF)]
        out += value
        out += [UInt8](repeating: padding, count: (4 - value.count % 4) % 4)
    }
}
