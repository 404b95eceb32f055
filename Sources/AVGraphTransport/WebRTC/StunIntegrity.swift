import COpenSSL

/// The checks STUN carries: MESSAGE-INTEGRITY is HMAC-SHA1, from OpenSSL (no cryptography is
/// written here); FINGERPRINT is CRC-32 (ISO 3309, as zlib's) XORed with 0x5354554e, a checksum
/// that only tells STUN from other traffic on the port.
package enum StunIntegrity {
    package static func hmacSHA1(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let done = key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                HMAC(EVP_sha1(), k.baseAddress, Int32(k.count), m.baseAddress, m.count, &out, &length)
            }
        }
        precondition(done != nil, "OpenSSL's HMAC-SHA1 failed")
        return Array(out.prefix(Int(length)))
    }

    /// Constant time: how long a comparison takes says nothing of where a forged MAC differs.
    package static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 } }
    }

    package static func fingerprint(_ bytes: [UInt8]) -> UInt32 { crc32(bytes) ^ 0x5354_554E }

    /// The FINGERPRINT attribute's value for the message bytes before it (big-endian).
    package static func fingerprintValue(_ bytes: [UInt8]) -> [UInt8] {
        let crc = fingerprint(bytes)
        return [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
    }

    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    package static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
