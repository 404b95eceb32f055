/// H.264 into RTP payloads (RFC 6184, packetization mode 1): each NAL unit of an access unit
/// whole when it fits, else as FU-A fragments; the parameter sets a keyframe needs (SPS and PPS,
/// put in front when the picture does not carry them, since a viewer that joins there has no
/// other way to get them) aggregated in one STAP-A. The access unit may be Annex B (x264's own
/// output) or length-prefixed (avcC, a phone's stream passed through), as the stream says; both read in place.
package enum H264Packetizer {
    /// What a payload may be at most: 1200-byte datagrams (what browsers send and take, under
    /// every tunnel's MTU) less RTP's 12-byte header and SRTP's trailer.
    package static let maxPayload = 1200 - 12 - 16

    /// The NAL units of an access unit: `lengthSize`-byte big-endian lengths (a length past the
    /// end ends the reading), or Annex B when `lengthSize` is nil. Told by the stream's
    /// configuration, never guessed from the bytes: a 4-byte length of 256 to 511 reads as a start code.
    package static func units(_ bytes: UnsafeRawBufferPointer, lengthSize: Int?) -> [Range<Int>] {
        let n = bytes.count
        guard let lengthSize else {
            var units: [Range<Int>] = []
            var start: Int?
            var i = 0
            while i + 2 < n {
                if bytes[i] == 0, bytes[i + 1] == 0, bytes[i + 2] == 1 {
                    if let s = start { units.append(s..<(i > s && bytes[i - 1] == 0 ? i - 1 : i)) }
                    i += 3
                    start = i
                } else {
                    i += 1
                }
            }
            if let s = start, s < n { units.append(s..<n) }
            return units.filter { !$0.isEmpty }
        }
        var units: [Range<Int>] = []
        var at = 0
        while at + lengthSize <= n {
            var length = 0
            for k in 0..<lengthSize { length = length << 8 | Int(bytes[at + k]) }
            at += lengthSize
            guard length > 0, at + length <= n else { break }
            units.append(at..<(at + length))
            at += length
        }
        return units
    }

    /// The payloads of one access unit, in order (the last one's packet carries the marker bit).
    /// `parameterSets`: the stream's SPS and PPS, sent before an IDR that lacks them.
    package static func payloads(_ bytes: UnsafeRawBufferPointer, lengthSize: Int?, parameterSets: [[UInt8]],
                                 maxPayload: Int = maxPayload) -> (payloads: [[UInt8]], keyframe: Bool) {
        let units = units(bytes, lengthSize: lengthSize).filter { bytes[$0.lowerBound] & 0x1F != 9 }  // access unit delimiters: no use over RTP
        let types = units.map { bytes[$0.lowerBound] & 0x1F }
        let keyframe = types.contains(5)
        var out: [[UInt8]] = []
        if keyframe, !types.contains(7), !parameterSets.isEmpty {
            out.append(aggregate(parameterSets))
        }
        for unit in units {
            let count = unit.count
            if count <= maxPayload {
                out.append(Array(UnsafeRawBufferPointer(rebasing: bytes[unit])))
                continue
            }
            // FU-A: the indicator keeps the unit's F and NRI bits, the header its type and S/E.
            let header = bytes[unit.lowerBound]
            let indicator = header & 0xE0 | 28
            var at = unit.lowerBound + 1
            let chunk = maxPayload - 2
            while at < unit.upperBound {
                let end = min(at + chunk, unit.upperBound)
                var payload = [UInt8]()
                payload.reserveCapacity(2 + end - at)
                let fu = header & 0x1F | (at == unit.lowerBound + 1 ? 0x80 : 0) | (end == unit.upperBound ? 0x40 : 0)
                payload.append(indicator)
                payload.append(fu)
                payload.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[at..<end]))
                out.append(payload)
                at = end
            }
        }
        return (out, keyframe)
    }

    /// A STAP-A of small units (each with its 16-bit size), NRI the highest of them.
    package static func aggregate(_ units: [[UInt8]]) -> [UInt8] {
        let nri = units.map { ($0.first ?? 0) & 0x60 }.max() ?? 0x60
        var out: [UInt8] = [nri | 24]
        for u in units {
            out += [UInt8(u.count >> 8), UInt8(u.count & 0xFF)]
            out += u
        }
        return out
    }

    /// `profile-level-id` of an SPS (its profile_idc, constraint flags and level_idc, hex).
    package static func profileLevelID(sps: [UInt8]) -> String? {
        guard sps.count >= 4 else { return nil }
        return sps[1...3].map { String($0, radix: 16).leftPadded(2) }.joined()
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
