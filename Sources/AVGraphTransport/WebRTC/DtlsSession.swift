import AVGraph
import COpenSSL
import Foundation

/// One peer's DTLS 1.2 handshake, avgraph the server (its answer's `a=setup:passive`) or, when the
/// offer says the peer is (`a=setup:passive`: FFmpeg's WHIP muxer), the client; over
/// datagrams the caller carries (the UDP port is shared with STUN and SRTP: RFC 7983 tells
/// them apart). OpenSSL does the handshake between two memory BIOs; what it writes is cut back
/// into datagrams at its record boundaries. Once connected: the SRTP profile both chose and the
/// keys exported from the handshake (RFC 5764), and the peer's certificate checked against the
/// fingerprint its SDP gave. Not thread-safe: one owner feeds it.
package final class DtlsSession {
    package enum SrtpProfile: UInt, Sendable, Equatable {
        case aes128CmHmacSha1_80 = 0x0001
        case aeadAes128Gcm = 0x0007

        /// Key and salt lengths (RFC 5764, RFC 7714).
        package var keyLength: Int { 16 }
        package var saltLength: Int { self == .aeadAes128Gcm ? 12 : 14 }
    }

    package enum Role: Sendable, Equatable { case server, client }

    /// SRTP's master keys and salts, each side's (the client is usually the peer: the browser, OBS).
    package struct SrtpKeys: Sendable, Equatable {
        package var profile: SrtpProfile
        package var clientKey: [UInt8], clientSalt: [UInt8], serverKey: [UInt8], serverSalt: [UInt8]
    }

    package enum State: Equatable {
        case handshaking
        case connected(SrtpKeys)
        case failed(String)
    }

    package private(set) var state = State.handshaking
    package let role: Role
    private let ssl: OpaquePointer
    private let incoming: OpaquePointer
    private let outgoing: OpaquePointer
    private let remoteFingerprint: String?
    private let mtu: Int
    /// The keying material's label (RFC 5764 section 4.2).
    static let exporterLabel = "EXTRACTOR-dtls_srtp"

    /// `remoteFingerprint`: the SDP's `a=fingerprint:sha-256` of the peer (nil: any certificate, for tests).
    package init(certificate: DtlsCertificate, remoteFingerprint: String?, role: Role = .server, mtu: Int = 1200) throws {
        guard let ssl = SSL_new(certificate.context), let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            throw MediaError("DTLS: no session: \(DtlsCertificate.lastError())")
        }
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        self.remoteFingerprint = remoteFingerprint?.uppercased()
        self.mtu = mtu
        self.role = role
        // An empty BIO is "try again", not the end.
        avg_bio_set_mem_eof_return(incoming, -1)
        avg_bio_set_mem_eof_return(outgoing, -1)
        SSL_set_bio(ssl, incoming, outgoing)
        if role == .server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
        // The path's MTU is not for OpenSSL to find (there is no socket): records fit `mtu`.
        avg_ssl_no_query_mtu(ssl)
        avg_ssl_set_mtu(ssl, mtu - 28)
    }

    deinit { SSL_free(ssl) }

    /// A datagram from the peer (first byte 20-63); returns the datagrams to send back.
    package func receive(_ datagram: [UInt8]) -> [[UInt8]] {
        guard case .handshaking = state else {
            // After the handshake: a retransmitted Finished from a peer that missed ours is answered.
            _ = datagram.withUnsafeBytes { BIO_write(incoming, $0.baseAddress, Int32($0.count)) }
            var scratch = [UInt8](repeating: 0, count: 2048)
            _ = SSL_read(ssl, &scratch, Int32(scratch.count))
            return pendingDatagrams()
        }
        _ = datagram.withUnsafeBytes { BIO_write(incoming, $0.baseAddress, Int32($0.count)) }
        step()
        return pendingDatagrams()
    }

    /// As the client: the first flight (ClientHello), once the peer's address is known.
    package func start() -> [[UInt8]] {
        guard role == .client, case .handshaking = state else { return [] }
        step()
        return pendingDatagrams()
    }

    /// Seconds until OpenSSL wants to retransmit its last flight (nil: nothing pending).
    package var retransmitIn: Double? {
        var tv = timeval()
        guard case .handshaking = state, avg_dtls_get_timeout(ssl, &tv) == 1 else { return nil }
        return Double(tv.tv_sec) + Double(tv.tv_usec) / 1e6
    }

    /// Call when `retransmitIn` has passed: the flight to send again.
    package func handleTimeout() -> [[UInt8]] {
        guard case .handshaking = state else { return [] }
        if avg_dtls_handle_timeout(ssl) < 0 { state = .failed("the handshake timed out: \(DtlsCertificate.lastError())") }
        return pendingDatagrams()
    }

    private func step() {
        let r = SSL_do_handshake(ssl)
        if r == 1 { return finish() }
        let error = SSL_get_error(ssl, r)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return }
        state = .failed("the handshake failed: \(DtlsCertificate.lastError())")
    }

    private func finish() {
        guard let peer = SSL_get1_peer_certificate(ssl) else { return state = .failed("the peer showed no certificate") }
        defer { X509_free(peer) }
        if let expected = remoteFingerprint {
            guard let digest = DtlsCertificate.sha256(peer), DtlsCertificate.colonHex(digest) == expected else {
                return state = .failed("the peer's certificate is not the one its offer's fingerprint names")
            }
        }
        guard let chosen = SSL_get_selected_srtp_profile(ssl), let profile = SrtpProfile(rawValue: chosen.pointee.id) else {
            return state = .failed("no SRTP profile was agreed (the peer offered neither AEAD_AES_128_GCM nor AES_CM_128_HMAC_SHA1_80)")
        }
        let k = profile.keyLength, s = profile.saltLength
        var material = [UInt8](repeating: 0, count: 2 * (k + s))
        let label = Self.exporterLabel
        guard SSL_export_keying_material(ssl, &material, material.count, label, label.utf8.count, nil, 0, 0) == 1 else {
            return state = .failed("exporting SRTP's keys failed: \(DtlsCertificate.lastError())")
        }
        // RFC 5764 4.2: client key, server key, client salt, server salt.
        state = .connected(SrtpKeys(profile: profile, clientKey: Array(material[0..<k]), clientSalt: Array(material[(2 * k)..<(2 * k + s)]),
                                    serverKey: Array(material[k..<(2 * k)]), serverSalt: Array(material[(2 * k + s)...])))
    }

    /// What OpenSSL wrote, cut into datagrams of whole records up to `mtu` bytes.
    private func pendingDatagrams() -> [[UInt8]] {
        var pointer: UnsafeMutablePointer<CChar>?
        let count = avg_bio_get_mem_data(outgoing, &pointer)
        guard count > 0, let pointer else { return [] }
        let bytes = [UInt8](UnsafeRawBufferPointer(start: pointer, count: count))
        _ = avg_bio_reset(outgoing)
        return Self.datagrams(of: bytes, mtu: mtu)
    }

    /// DTLS records (a 13-byte header whose last two bytes are the length) packed into datagrams.
    package static func datagrams(of bytes: [UInt8], mtu: Int) -> [[UInt8]] {
        var out: [[UInt8]] = [], current: [UInt8] = [], at = 0
        while at + 13 <= bytes.count {
            let length = 13 + (Int(bytes[at + 11]) << 8 | Int(bytes[at + 12]))
            let record = bytes[at..<min(bytes.count, at + length)]
            at += length
            if !current.isEmpty && current.count + record.count > mtu {
                out.append(current)
                current = []
            }
            current += record
        }
        if !current.isEmpty { out.append(current) }
        return out
    }
}
