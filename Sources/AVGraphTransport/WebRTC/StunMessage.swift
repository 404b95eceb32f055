/// A STUN message (RFC 8489, the ICE usage of RFC 8445): the 20-byte header and the attributes,
/// kept as they came (type and value) so that MESSAGE-INTEGRITY and FINGERPRINT can be checked
/// over the exact bytes. Parsing refuses what is not STUN (the first two bits, the magic cookie,
/// lengths that do not add up) without trusting a length it has not checked against the datagram.
package struct StunMessage: Equatable, Sendable {
    package enum Kind: UInt16, Sendable {
        case request = 0x0000, indication = 0x0010, success = 0x0100, error = 0x0110
    }

    package static let magicCookie: UInt32 = 0x2112_A442
    package static let binding: UInt16 = 0x0001

    package var method: UInt16
    package var kind: Kind
    package var transactionID: [UInt8]
    package var attributes: [StunAttribute]

    package init(method: UInt16 = binding, kind: Kind, transactionID: [UInt8], attributes: [StunAttribute] = []) {
        self.method = method
        self.kind = kind
        self.transactionID = transactionID
        self.attributes = attributes
    }

    package func first(_ type: UInt16) -> StunAttribute? { attributes.first { $0.type == type } }

    /// Whether a datagram is STUN at all (RFC 7983's demultiplexing on one port: the first byte
    /// 0-3, then the cookie), before any parsing.
    package static func looksLikeStun(_ bytes: some Collection<UInt8>) -> Bool {
        guard bytes.count >= 20, let first = bytes.first, first < 4 else { return false }
        let cookie = Array(bytes.dropFirst(4).prefix(4))
        return cookie == [0x21, 0x12, 0xA4, 0x42]
    }

    package static func parse(_ datagram: [UInt8]) throws(StunError) -> StunMessage {
        guard datagram.count >= 20 else { throw .truncated }
        guard datagram[0] & 0xC0 == 0 else { throw .notStun }
        let type = UInt16(datagram[0]) << 8 | UInt16(datagram[1])
        let length = Int(datagram[2]) << 8 | Int(datagram[3])
        guard datagram[4..<8].elementsEqual([0x21, 0x12, 0xA4, 0x42]) else { throw .notStun }
        guard length % 4 == 0, 20 + length == datagram.count else { throw .badLength }
        let classBits = type & 0x0110
        let method = (type & 0x000F) | (type & 0x00E0) >> 1 | (type & 0x3E00) >> 2
        var attributes: [StunAttribute] = []
        var at = 20
        while at < datagram.count {
            guard datagram.count - at >= 4 else { throw .truncated }
            let attributeType = UInt16(datagram[at]) << 8 | UInt16(datagram[at + 1])
            let valueLength = Int(datagram[at + 2]) << 8 | Int(datagram[at + 3])
            let padded = (valueLength + 3) & ~3
            guard datagram.count - at - 4 >= padded else { throw .truncated }
            attributes.append(StunAttribute(type: attributeType, value: Array(datagram[(at + 4)..<(at + 4 + valueLength)]), offset: at))
            at += 4 + padded
        }
        return StunMessage(method: method, kind: Kind(rawValue: classBits)!, transactionID: Array(datagram[8..<20]), attributes: attributes)
    }

    /// The message's bytes. With `integrityKey` a MESSAGE-INTEGRITY (HMAC-SHA1 with that key) is
    /// appended after the attributes, then with `fingerprint` a FINGERPRINT, each computed as the
    /// RFC says: over what precedes it, with the header's length already counting it.
    package func encoded(integrityKey: [UInt8]? = nil, fingerprint: Bool = false, padding: UInt8 = 0) -> [UInt8] {
        let m = method
        let type = (m & 0x000F) | (m & 0x0070) << 1 | (m & 0x0F80) << 2 | kind.rawValue
        var out: [UInt8] = [UInt8(type >> 8), UInt8(type & 0xFF), 0, 0, 0x21, 0x12, 0xA4, 0x42] + transactionID
        for a in attributes where a.type != StunAttribute.messageIntegrity && a.type != StunAttribute.fingerprint {
            a.append(to: &out, padding: padding)
        }
        func setLength(_ extra: Int) {
            let length = out.count - 20 + extra
            out[2] = UInt8(length >> 8)
            out[3] = UInt8(length & 0xFF)
        }
        if let key = integrityKey {
            setLength(24)
            let mac = StunIntegrity.hmacSHA1(key: key, message: out)
            StunAttribute(type: StunAttribute.messageIntegrity, value: mac).append(to: &out)
        }
        if fingerprint {
            setLength(8)
            StunAttribute(type: StunAttribute.fingerprint, value: StunIntegrity.fingerprintValue(out)).append(to: &out)
        }
        setLength(0)
        return out
    }

    /// Whether `datagram` (this message's bytes) carries a MESSAGE-INTEGRITY made with `key`.
    package func hasIntegrity(_ datagram: [UInt8], key: [UInt8]) -> Bool {
        guard let mi = first(StunAttribute.messageIntegrity), let offset = mi.offset, mi.value.count == 20,
              offset <= datagram.count else { return false }
        var covered = Array(datagram[..<offset])
        let length = offset - 20 + 24
        covered[2] = UInt8(length >> 8)
        covered[3] = UInt8(length & 0xFF)
        return StunIntegrity.sameBytes(StunIntegrity.hmacSHA1(key: key, message: covered), mi.value)
    }

    /// Whether `datagram` ends with a FINGERPRINT that matches it.
    package func hasFingerprint(_ datagram: [UInt8]) -> Bool {
        guard let fp = attributes.last, fp.type == StunAttribute.fingerprint, let offset = fp.offset, fp.value.count == 4 else { return false }
        return fp.value == StunIntegrity.fingerprintValue(Array(datagram[..<offset]))
    }
}

package enum StunError: Error, Equatable {
    case truncated, notStun, badLength, badAttribute
}
