/// The RTCP feedback a receiver sends (RFC 4585): a generic NACK for lost packets, a PLI when a
/// picture cannot be decoded. Written here as bytes, to be protected by SRTCP.
package enum RtcpFeedback {
    /// Transport-layer feedback (RTPFB, 205), FMT 1: each FCI a packet id and a bitmask of the 16 after it.
    package static func nack(sender: UInt32, media: UInt32, lost: [UInt16]) -> [UInt8] {
        var fci: [(UInt16, UInt16)] = []
        for seq in lost.sorted(by: { Int16(bitPattern: $0 &- lost[0]) < Int16(bitPattern: $1 &- lost[0]) }) {
            if let last = fci.last, case let d = seq &- last.0, d >= 1 && d <= 16 {
                fci[fci.count - 1].1 |= 1 << (d - 1)
            } else {
                fci.append((seq, 0))
            }
        }
        var out = header(format: 1, type: 205, words: 2 + fci.count, sender: sender, media: media)
        for (pid, blp) in fci { out += [UInt8(pid >> 8), UInt8(pid & 0xFF), UInt8(blp >> 8), UInt8(blp & 0xFF)] }
        return out
    }

    /// Payload-specific feedback (PSFB, 206), FMT 1: picture loss indication.
    package static func pli(sender: UInt32, media: UInt32) -> [UInt8] { header(format: 1, type: 206, words: 2, sender: sender, media: media) }

    private static func header(format: UInt8, type: UInt8, words: Int, sender: UInt32, media: UInt32) -> [UInt8] {
        func word(_ w: UInt32) -> [UInt8] { [UInt8(w >> 24), UInt8(w >> 16 & 0xFF), UInt8(w >> 8 & 0xFF), UInt8(w & 0xFF)] }
        return [0x80 | format, type, UInt8(words >> 8), UInt8(words & 0xFF)] + word(sender) + word(media)
    }
}
