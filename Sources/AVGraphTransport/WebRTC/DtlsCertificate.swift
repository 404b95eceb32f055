import AVGraph
import COpenSSL
import Foundation

/// The certificate a WebRTC endpoint shows in its DTLS handshake: an ECDSA P-256 key and a
/// self-signed certificate made by OpenSSL at start (WebRTC trusts it by the SHA-256 fingerprint
/// the SDP answer carries, not by any authority). Nothing here is cryptography of our own.
// @unchecked: the key and certificate are made once and only read after (OpenSSL counts their references).
package final class DtlsCertificate: @unchecked Sendable {
    let key: OpaquePointer
    let certificate: OpaquePointer
    /// DTLS 1.2 as the server, this certificate, the peer's certificate required (its fingerprint
    /// is checked against the SDP's by the session, not by a chain), SRTP offered in WebRTC's order.
    let context: OpaquePointer
    /// `AB:CD:...`, the SHA-256 of the certificate's DER, as `a=fingerprint:sha-256` writes it.
    package let fingerprint: String

    package init(commonName: String = "avgraph", days: Int = 30) throws {
        guard let key = avg_ec_p256_key() else { throw MediaError("DTLS: OpenSSL made no P-256 key: \(Self.lastError())") }
        guard let x = X509_new() else {
            EVP_PKEY_free(key)
            throw MediaError("DTLS: OpenSSL made no certificate")
        }
        self.key = key
        certificate = x
        X509_set_version(x, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(x), Int.random(in: 1...Int(Int32.max)))
        // A day of slack before now: a peer whose clock runs behind still takes it.
        X509_gmtime_adj(X509_getm_notBefore(x), -86_400)
        X509_gmtime_adj(X509_getm_notAfter(x), days * 86_400)
        X509_set_pubkey(x, key)
        let name = X509_get_subject_name(x)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0)
        X509_set_issuer_name(x, name)
        guard X509_sign(x, key, EVP_sha256()) > 0 else { throw MediaError("DTLS: signing the certificate failed: \(Self.lastError())") }
        guard let digest = Self.sha256(x) else { throw MediaError("DTLS: no certificate digest") }
        fingerprint = Self.colonHex(digest)
        // Either role: avgraph is the DTLS server unless the offer says it is (`a=setup:passive`, FFmpeg's WHIP muxer).
        guard let context = SSL_CTX_new(DTLS_method()) else { throw MediaError("DTLS: no context: \(Self.lastError())") }
        self.context = context
        avg_ssl_ctx_set_min_dtls12(context)
        // The groups avgraph takes, as the DTLS client, for the key exchange and the server's EC
        // certificate alike: the usual ones and P-224, the curve of the certificate FFmpeg's WHIP
        // muxer (the DTLS server when its offer says `a=setup:passive`) makes for itself.
        _ = avg_ssl_ctx_set_groups(context, "X25519:P-256:P-384:P-224")
        guard SSL_CTX_use_certificate(context, x) == 1, SSL_CTX_use_PrivateKey(context, key) == 1,
              SSL_CTX_set_tlsext_use_srtp(context, "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80") == 0 else {
            throw MediaError("DTLS: the context refused its certificate or SRTP profiles: \(Self.lastError())")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, avg_verify_any_certificate)
    }

    deinit {
        SSL_CTX_free(context)
        X509_free(certificate)
        EVP_PKEY_free(key)
    }

    static func sha256(_ x: OpaquePointer) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard X509_digest(x, EVP_sha256(), &out, &length) == 1 else { return nil }
        return Array(out.prefix(Int(length)))
    }

    package static func colonHex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    /// OpenSSL's queue of errors, oldest first, emptied.
    static func lastError() -> String {
        var lines: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            lines.append(String(filledBuffer: text))
        }
        return lines.isEmpty ? "no detail" : lines.joined(separator: "; ")
    }
}
