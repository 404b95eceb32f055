import AVGraph
import CSrtp

/// SRTP and SRTCP (RFC 3711, RFC 7714) for one direction of one WebRTC peer, through libsrtp2:
/// keyed with the master key and salt the DTLS handshake exported (`DtlsSession.SrtpKeys`,
/// the client's for what the peer sends, the server's for what avgraph sends). Packets are
/// changed in place: unprotecting drops the auth tag (and the SRTCP index), protecting appends them.
/// Not thread-safe: one owner uses it.
package final class SrtpSession {
    package enum Direction: Sendable { case inbound, outbound }

    /// What libsrtp2 adds at most to a packet it protects (tag, MKI, SRTCP index).
    package static let maximumTrailer = Int(SRTP_MAX_TRAILER_LEN)
    /// How far back a retransmitted packet (NACK answered) may still be taken.
    static let replayWindow: UInt = 4096

    private var session: srtp_t?
    package let direction: Direction

    private static let initialized: srtp_err_status_t = srtp_init()

    package init(profile: DtlsSession.SrtpProfile, key: [UInt8], salt: [UInt8], direction: Direction) throws {
        guard Self.initialized == srtp_err_status_ok else { throw MediaError("SRTP: libsrtp2 did not start (\(Self.initialized.rawValue))") }
        guard key.count == profile.keyLength, salt.count == profile.saltLength else {
            throw MediaError("SRTP: a \(profile) key is \(profile.keyLength) + \(profile.saltLength) bytes, not \(key.count) + \(salt.count)")
        }
        self.direction = direction
        var policy = srtp_policy_t()
        switch profile {
        case .aes128CmHmacSha1_80:
            srtp_crypto_policy_set_rtp_default(&policy.rtp)
            srtp_crypto_policy_set_rtcp_default(&policy.rtcp)
        case .aeadAes128Gcm:
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
            srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        }
        policy.ssrc.type = direction == .inbound ? ssrc_any_inbound : ssrc_any_outbound
        policy.window_size = Self.replayWindow
        // avgraph answers NACKs with the same packet again.
        policy.allow_repeat_tx = direction == .outbound ? 1 : 0
        var master = key + salt
        let status = master.withUnsafeMutableBufferPointer { m -> srtp_err_status_t in
            policy.key = m.baseAddress
            return srtp_create(&session, &policy)
        }
        guard status == srtp_err_status_ok else { throw MediaError("SRTP: libsrtp2 refused the session (\(status.rawValue))") }
    }

    deinit { if let session { srtp_dealloc(session) } }

    /// An SRTP packet from the peer, authenticated and decrypted in place.
    package func unprotect(_ packet: inout [UInt8]) throws { try run(&packet, srtp_unprotect, "unprotect RTP") }
    package func unprotectRtcp(_ packet: inout [UInt8]) throws { try run(&packet, srtp_unprotect_rtcp, "unprotect RTCP") }
    /// An RTP packet to the peer, encrypted and authenticated in place.
    package func protect(_ packet: inout [UInt8]) throws { try run(&packet, srtp_protect, "protect RTP", grow: true) }
    package func protectRtcp(_ packet: inout [UInt8]) throws { try run(&packet, srtp_protect_rtcp, "protect RTCP", grow: true) }

    /// An RTP packet of `length` bytes at `buffer` (room for `maximumTrailer` more), encrypted and
    /// authenticated in place; returns its new length. What a sender to many calls per packet: no allocation.
    package func protect(_ buffer: UnsafeMutableRawPointer, length: Int) throws -> Int {
        var n = Int32(length)
        let status = srtp_protect(session, buffer, &n)
        guard status == srtp_err_status_ok else { throw MediaError("SRTP: protect RTP failed (\(Self.describe(status)))") }
        return Int(n)
    }

    private func run(_ packet: inout [UInt8], _ f: (srtp_t?, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int32>?) -> srtp_err_status_t,
                     _ what: String, grow: Bool = false) throws {
        var length = Int32(packet.count)
        if grow { packet += [UInt8](repeating: 0, count: Self.maximumTrailer) }
        let status = packet.withUnsafeMutableBytes { f(session, $0.baseAddress, &length) }
        guard status == srtp_err_status_ok else {
            if grow { packet.removeLast(Self.maximumTrailer) }
            throw MediaError("SRTP: \(what) failed (\(Self.describe(status)))")
        }
        packet.removeLast(packet.count - Int(length))
    }

    static func describe(_ s: srtp_err_status_t) -> String {
        switch s {
        case srtp_err_status_auth_fail: "authentication failed"
        case srtp_err_status_replay_fail: "a replayed packet"
        case srtp_err_status_replay_old: "a packet older than the replay window"
        case srtp_err_status_bad_param: "not an SRTP packet"
        default: "libsrtp2 status \(s.rawValue)"
        }
    }
}
