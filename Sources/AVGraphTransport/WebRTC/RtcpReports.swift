/// RTCP's reports (RFC 3550 6.4): the sender reports read out of a compound packet (what ties a
/// stream's RTP clock to the sender's wallclock, for lip sync) and the receiver report avgraph
/// sends back (loss and the round trip a sender's rate control needs).
package enum RtcpReports {
    package struct SenderReport: Equatable, Sendable {
        package var ssrc: UInt32
        /// The sender's wallclock (NTP) in seconds, and its middle 32 bits as LSR echoes them.
        package var ntpSeconds: Double
        package var ntpMiddle: UInt32
        package var rtpTimestamp: UInt32
        package init(ssrc: UInt32, ntpSeconds: Double, ntpMiddle: UInt32, rtpTimestamp: UInt32) {
            (self.ssrc, self.ntpSeconds, self.ntpMiddle, self.rtpTimestamp) = (ssrc, ntpSeconds, ntpMiddle, rtpTimestamp)
        }
    }

    /// The sender reports in a compound RTCP packet; anything malformed ends the reading there.
    package static func senderReports(_ packet: [UInt8]) -> [SenderReport] {
        var reports: [SenderReport] = []
        var at = 0
        func word(_ i: Int) -> UInt32 { UInt32(packet[i]) << 24 | UInt32(packet[i + 1]) << 16 | UInt32(packet[i + 2]) << 8 | UInt32(packet[i + 3]) }
        while at + 4 <= packet.count, packet[at] >> 6 == 2 {
            let length = ((Int(packet[at + 2]) << 8 | Int(packet[at + 3])) + 1) * 4
            guard at + length <= packet.count else { break }
            if packet[at + 1] == 200, length >= 28 {
                let seconds = word(at + 8), fraction = word(at + 12)
                reports.append(SenderReport(ssrc: word(at + 4), ntpSeconds: Double(seconds) + Double(fraction) / 4_294_967_296,
                                            ntpMiddle: seconds << 16 | fraction >> 16, rtpTimestamp: word(at + 16)))
            }
            at += length
        }
        return reports
    }

    /// One report block's facts about a stream avgraph receives.
    package struct Reception: Equatable, Sendable {
        package var ssrc: UInt32
        package var fractionLost: UInt8
        package var cumulativeLost: Int32
        package var highestSequence: UInt32
        package var jitter: UInt32
        package var lastSenderReport: UInt32
        /// Since that sender report, in 1/65536 s.
        package var delaySinceLastReport: UInt32
        package init(ssrc: UInt32, fractionLost: UInt8 = 0, cumulativeLost: Int32 = 0, highestSequence: UInt32, jitter: UInt32 = 0,
                     lastSenderReport: UInt32 = 0, delaySinceLastReport: UInt32 = 0) {
            (self.ssrc, self.fractionLost, self.cumulativeLost, self.highestSequence) = (ssrc, fractionLost, cumulativeLost, highestSequence)
            (self.jitter, self.lastSenderReport, self.delaySinceLastReport) = (jitter, lastSenderReport, delaySinceLastReport)
        }
    }

    /// A receiver report (PT 201) from `sender` with a block for each stream (at most 31).
    package static func receiverReport(sender: UInt32, blocks: [Reception]) -> [UInt8] {
        let blocks = blocks.prefix(31)
        var out: [UInt8] = [0x80 | UInt8(blocks.count), 201]
        func put(_ w: UInt32) { out += [UInt8(w >> 24), UInt8(w >> 16 & 0xFF), UInt8(w >> 8 & 0xFF), UInt8(w & 0xFF)] }
        let words = 1 + 6 * blocks.count
        out += [UInt8(words >> 8), UInt8(words & 0xFF)]
        put(sender)
        for b in blocks {
            put(b.ssrc)
            let lost = UInt32(bitPattern: max(-0x80_0000, min(0x7F_FFFF, b.cumulativeLost))) & 0xFF_FFFF
            put(UInt32(b.fractionLost) << 24 | lost)
            put(b.highestSequence)
            put(b.jitter)
            put(b.lastSenderReport)
            put(b.delaySinceLastReport)
        }
        return out
    }
}
