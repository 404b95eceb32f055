/// H.264 out of RTP (RFC 6184, packetization-mode 1 as WebRTC sends it): single NAL unit
/// packets, STAP-A aggregates and FU-A fragments, reassembled into access units in Annex B
/// (start codes), one per RTP timestamp, complete when the marker bit says so or the timestamp
/// moves on. A lost fragment loses its NAL unit, never a neighbour's bytes: an access unit with
/// a hole is handed on marked damaged, for the caller to ask for a keyframe (PLI).
package struct H264Depacketizer: Sendable {
    package struct AccessUnit: Equatable, Sendable {
        package var timestamp: UInt32
        /// Annex B: each NAL unit after a 4-byte start code.
        package var bytes: [UInt8]
        package var isKeyframe: Bool
        /// A packet of it was missing or malformed.
        package var damaged: Bool
    }

    /// The largest access unit taken (a stream sized to exhaust memory is cut off, damaged).
    package let maxBytes: Int
    private var current: AccessUnit?
    private var fragment: [UInt8]?
    private var lastSequence: UInt16?

    package init(maxBytes: Int = 8 << 20) { self.maxBytes = maxBytes }

    /// Takes one packet; returns the access units it completed (the previous one when the
    /// timestamp moved on without a marker, and this one when it carries the marker).
    package mutating func push(_ packet: RtpPacket) -> [AccessUnit] {
        var done: [AccessUnit] = []
        if let unit = current, unit.timestamp != packet.timestamp {
            done.append(unit)
            current = nil
            fragment = nil
        }
        if current == nil { current = AccessUnit(timestamp: packet.timestamp, bytes: [], isKeyframe: false, damaged: false) }
        if let last = lastSequence, packet.sequence != last &+ 1 {
            // A gap inside an access unit (or between two: the unit after a gap may lack its first NAL units).
            current?.damaged = true
            fragment = nil
        }
        lastSequence = packet.sequence
        take(packet.payload)
        if packet.marker, let unit = current {
            done.append(unit)
            current = nil
            fragment = nil
        }
        return done
    }

    private mutating func take(_ payload: ArraySlice<UInt8>) {
        guard let header = payload.first else { current?.damaged = true; return }
        let type = header & 0x1F
        switch type {
        case 1...23:
            append(nal: payload)
        case 24:  // STAP-A: 16-bit sizes, then the NAL units
            var at = payload.startIndex + 1
            while at < payload.endIndex {
                guard payload.endIndex - at >= 2 else { current?.damaged = true; return }
                let size = Int(payload[at]) << 8 | Int(payload[at + 1])
                at += 2
                guard size > 0, payload.endIndex - at >= size else { current?.damaged = true; return }
                append(nal: payload[at..<(at + size)])
                at += size
            }
        case 28:  // FU-A: indicator, header (start, end, type), the fragment
            guard payload.count >= 2 else { current?.damaged = true; return }
            let fu = payload[payload.startIndex + 1]
            let start = fu & 0x80 != 0, end = fu & 0x40 != 0
            let body = payload.dropFirst(2)
            if start {
                if fragment != nil { current?.damaged = true }
                fragment = [header & 0xE0 | fu & 0x1F] + body
            } else if fragment != nil {
                fragment! += body
                if fragment!.count > maxBytes { fragment = nil; current?.damaged = true; return }
            } else {
                // The start was lost: the rest of this NAL unit is of no use.
                current?.damaged = true
                return
            }
            if end, let nal = fragment {
                append(nal: nal[...])
                fragment = nil
            }
        default:
            // STAP-B, MTAP, FU-B: not in packetization-mode 1.
            current?.damaged = true
        }
    }

    private mutating func append(nal: ArraySlice<UInt8>) {
        guard let first = nal.first, current != nil else { return }
        guard current!.bytes.count + nal.count + 4 <= maxBytes else { current!.damaged = true; return }
        // In place (`current!`): a copy of the unit per NAL unit would make a big picture quadratic.
        if first & 0x1F == 5 { current!.isKeyframe = true }
        current!.bytes += [0, 0, 0, 1]
        current!.bytes += nal
    }
}
