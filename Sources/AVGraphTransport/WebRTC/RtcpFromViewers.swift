/// RTCP as a sender meets it (RFC 3550, RFC 4585, RFC 5104): the sender reports avgraph writes
/// for each stream it sends (what ties RTP time to the wallclock, for a viewer's lip sync and its
/// latency estimate), and what viewers send back read out of a compound packet: receiver report
/// blocks (loss, jitter, round trip), NACKs, PLIs and FIRs. Anything malformed ends the reading
/// there; what is unknown (REMB, transport-wide feedback, SDES) is skipped.
package enum RtcpFromViewers {
    package enum Item: Equatable, Sendable {
        case reception(RtcpReports.Reception)
        /// Sequence numbers the viewer lacks, on the media SSRC.
        case nack(media: UInt32, lost: [UInt16])
        case pictureLoss(media: UInt32)
        case fullIntraRequest(media: UInt32)
    }

    package static func read(_ packet: [UInt8]) -> [Item] {
        var items: [Item] = []
        var at = 0
        func word(_ i: Int) -> UInt32 { UInt32(packet[i]) << 24 | UInt32(packet[i + 1]) << 16 | UInt32(packet[i + 2]) << 8 | UInt32(packet[i + 3]) }
        while at + 4 <= packet.count, packet[at] >> 6 == 2 {
            let count = Int(packet[at] & 0x1F), type = packet[at + 1]
            let length = ((Int(packet[at + 2]) << 8 | Int(packet[at + 3])) + 1) * 4
            guard at + length <= packet.count else { break }
            switch type {
            case 200, 201:
                // A sender report's blocks follow its 20 bytes of sender info.
                var block = at + 8 + (type == 200 ? 20 : 0)
                for _ in 0..<count where block + 24 <= at + length {
                    let lostWord = word(block + 4)
                    let cumulative = Int32(bitPattern: lostWord << 8) >> 8
                    items.append(.reception(.init(ssrc: word(block), fractionLost: UInt8(lostWord >> 24), cumulativeLost: cumulative,
                                                  highestSequence: word(block + 8), jitter: word(block + 12),
                                                  lastSenderReport: word(block + 16), delaySinceLastReport: word(block + 20))))
                    block += 24
                }
            case 205 where count == 1 && length >= 12:
                var lost: [UInt16] = []
                var fci = at + 12
                while fci + 4 <= at + length, lost.count < 4096 {
                    let pid = UInt16(packet[fci]) << 8 | UInt16(packet[fci + 1])
                    let blp = UInt16(packet[fci + 2]) << 8 | UInt16(packet[fci + 3])
                    lost.append(pid)
                    for bit in 0..<16 where blp & (1 << bit) != 0 { lost.append(pid &+ UInt16(bit + 1)) }
                    fci += 4
                }
                items.append(.nack(media: word(at + 8), lost: lost))
            case 206 where count == 1 && length >= 12:
                items.append(.pictureLoss(media: word(at + 8)))
            case 206 where count == 4 && length >= 20:
                // FIR's media SSRC is in its FCI entries (RFC 5104 4.3.1).
                var fci = at + 12
                while fci + 8 <= at + length {
                    items.append(.fullIntraRequest(media: word(fci)))
                    fci += 8
                }
            default: break
            }
            at += length
        }
        return items
    }

    /// A sender report (PT 200) for one stream, no report blocks: `ntp` is Unix seconds.
    package static func senderReport(ssrc: UInt32, ntp unix: Double, rtpTimestamp: UInt32, packets: UInt32, octets: UInt32) -> (bytes: [UInt8], middle: UInt32) {
        // NTP counts from 1900.
        let ntp = unix + 2_208_988_800
        let seconds = UInt32(truncatingIfNeeded: Int64(ntp))
        let fraction = UInt32(truncatingIfNeeded: Int64((ntp - ntp.rounded(.down)) * 4_294_967_296))
        var out: [UInt8] = [0x80, 200, 0, 6]
        func put(_ w: UInt32) { out += [UInt8(w >> 24), UInt8(w >> 16 & 0xFF), UInt8(w >> 8 & 0xFF), UInt8(w & 0xFF)] }
        put(ssrc)
        put(seconds)
        put(fraction)
        put(rtpTimestamp)
        put(packets)
        put(octets)
        return (out, seconds << 16 | fraction >> 16)
    }
}
