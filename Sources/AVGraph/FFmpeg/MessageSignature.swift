import CFFmpeg

/// HMAC-SHA256 (RFC 2104) on libavutil's `av_hmac`: what signs `avgraph serve`'s hooks, without a
/// crypto library of its own (CryptoKit is not on Linux; swift-crypto would cost the build).
public enum MessageSignature {
    /// The 32-byte HMAC-SHA256 of `message` with `key`.
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        guard let context = av_hmac_alloc(AV_HMAC_SHA256) else { fatalError("av_hmac_alloc failed: out of memory") }
        defer { av_hmac_free(context) }
        av_hmac_init(context, key, UInt32(key.count))
        av_hmac_update(context, message, UInt32(message.count))
        var out = [UInt8](repeating: 0, count: 32)
        _ = av_hmac_final(context, &out, 32)
        return out
    }

    /// Lowercase hex, as `X-Avgraph-Signature: sha256=` carries it.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }
}
