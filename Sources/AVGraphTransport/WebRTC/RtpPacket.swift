/// One RTP packet (RFC 3550 section 5.1), read without copying its payload's bytes until asked:
/// version 2, CSRCs, a header extension (RFC 8285's one- and two-byte forms are the extension's
/// own business) and padding, each length checked against the datagram before it is trusted.
package struct RtpPacket: Equatable, Sendable {
    package var marker: Bool
    package var payloadType: UInt8
    package var sequence: UInt16
    package var timestamp: UInt32
    package var ssrc: UInt32
    package var csrcs: [UInt32]
    /// The extension's profile word and data (without its 4-byte header), nil without one.
    package var extensionProfile: UInt16?
    package var extensionData: [UInt8]
    package var payload: ArraySlice<UInt8>

    package init(marker: Bool, payloadType: UInt8, sequence: UInt16, timestamp: UInt32, ssrc: UInt32, payload: ArraySlice<UInt8>,
                 csrcs: [UInt32] = [], extensionProfile: UInt16? = nil, extensionData: [UInt8] = []) {
        self.marker = marker
        self.payloadType = payloadType
        self.sequence = sequence
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.payload = payload
        self.csrcs = csrcs
        self.extensionProfile = extensionProfile
        self.extensionData = extensionData
    }

    package enum ParseError: Error, Equatable { case truncated, notVersion2, badPadding }

    package static func parse(_ datagram: [UInt8]) throws(ParseError) -> RtpPacket {
        guard datagram.count >= 12 else { throw .truncated }
        guard datagram[0] >> 6 == 2 else { throw .notVersion2 }
        let hasPadding = datagram[0] & 0x20 != 0, hasExtension = datagram[0] & 0x10 != 0
        let csrcCount = Int(datagram[0] & 0x0F)
        func word(_ at: Int) -> UInt32 {
            UInt32(datagram[at]) << 24 | UInt32(datagram[at + 1]) << 16 | UInt32(datagram[at + 2]) << 8 | UInt32(datagram[at + 3])
        }
        var at = 12
        guard datagram.count >= at + 4 * csrcCount else { throw .truncated }
        let csrcs = (0..<csrcCount).map { word(12 + 4 * $0) }
        at += 4 * csrcCount
        var profile: UInt16?
        var extensionData: [UInt8] = []
        if hasExtension {
            guard datagram.count >= at + 4 else { throw .truncated }
            profile = UInt16(datagram[at]) << 8 | UInt16(datagram[at + 1])
            let words = Int(datagram[at + 2]) << 8 | Int(datagram[at + 3])
            guard datagram.count >= at + 4 + 4 * words else { throw .truncated }
            extensionData = Array(datagram[(at + 4)..<(at + 4 + 4 * words)])
            at += 4 + 4 * words
        }
        var end = datagram.count
        if hasPadding {
            let pad = Int(datagram[datagram.count - 1])
            guard pad >= 1, end - at >= pad else { throw .badPadding }
            end -= pad
        }
        return RtpPacket(marker: datagram[1] & 0x80 != 0, payloadType: datagram[1] & 0x7F,
                         sequence: UInt16(datagram[2]) << 8 | UInt16(datagram[3]), timestamp: word(4), ssrc: word(8),
                         payload: datagram[at..<end], csrcs: csrcs, extensionProfile: profile, extensionData: extensionData)
    }

    /// The packet's bytes (no padding): what a packetizer sends, and what the tests make.
    package var encoded: [UInt8] {
        var out: [UInt8] = [0x80 | (extensionProfile != nil ? 0x10 : 0) | UInt8(csrcs.count & 0x0F), (marker ? 0x80 : 0) | payloadType & 0x7F,
                            UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
        func put(_ w: UInt32) { out += [UInt8(w >> 24), UInt8(w >> 16 & 0xFF), UInt8(w >> 8 & 0xFF), UInt8(w & 0xFF)] }
        put(timestamp)
        put(ssrc)
        csrcs.forEach(put)
        if let profile = extensionProfile {
            let words = (extensionData.count + 3) / 4
            out += [UInt8(profile >> 8), UInt8(profile & 0xFF), UInt8(words >> 8), UInt8(words & 0xFF)]
            out += extensionData + [UInt8](repeating: 0, count: words * 4 - extensionData.count)
        }
        out += payload
        return out
    }

    /// Whether a datagram on a WebRTC port is RTP or RTCP (RFC 7983: first byte 128-191) rather
    /// than STUN (0-3) or DTLS (20-63).
    package static func looksLikeRtp(_ datagram: [UInt8]) -> Bool { datagram.first.map { (128...191).contains($0) } ?? false }
}
