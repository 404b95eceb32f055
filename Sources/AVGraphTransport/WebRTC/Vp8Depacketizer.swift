/// VP8 out of RTP (RFC 7741): each packet's payload descriptor (and its extensions: picture id,
/// TL0PICIDX, TID/KEYIDX) taken off, the partitions of one frame joined from the packet that
/// starts partition 0 to the one with the marker. A frame with a hole, or whose start was lost,
/// is handed on marked damaged and empty, for the caller to ask for a keyframe.
package struct Vp8Depacketizer: Sendable {
    package typealias Frame = RtpVideoFrame

    package let maxBytes: Int
    private var current: Frame?
    private var lastSequence: UInt16?

    package init(maxBytes: Int = 8 << 20) { self.maxBytes = maxBytes }

    /// The VP8 payload after the descriptor, and whether it starts partition 0 (a frame's start); nil: malformed.
    static func payload(_ p: ArraySlice<UInt8>) -> (start: Bool, data: ArraySlice<UInt8>)? {
        var i = p.startIndex
        guard i < p.endIndex else { return nil }
        let first = p[i]
        let start = first & 0x10 != 0 && first & 0x07 == 0
        i += 1
        if first & 0x80 != 0 {
            guard i < p.endIndex else { return nil }
            let x = p[i]
            i += 1
            if x & 0x80 != 0 {
                guard i < p.endIndex else { return nil }
                i += p[i] & 0x80 != 0 ? 2 : 1
            }
            if x & 0x40 != 0 { i += 1 }
            if x & 0x30 != 0 { i += 1 }
        }
        guard i <= p.endIndex else { return nil }
        return (start, p[i...])
    }

    /// Takes one packet; returns the frames it completed (the previous one when the timestamp moved on without a marker).
    package mutating func push(_ packet: RtpPacket) -> [Frame] {
        var done: [Frame] = []
        let gap = lastSequence.map { packet.sequence != $0 &+ 1 } ?? false
        lastSequence = packet.sequence
        if let frame = current, frame.timestamp != packet.timestamp {
            done.append(finished(frame, damaged: true))
            current = nil
        }
        guard let (start, data) = Self.payload(packet.payload) else {
            // A malformed packet is a hole in its frame (one is begun for it if none was).
            var frame = current ?? Frame(timestamp: packet.timestamp, bytes: [], isKeyframe: false, damaged: true)
            frame.damaged = true
            current = frame
            if packet.marker {
                done.append(finished(frame, damaged: true))
                current = nil
            }
            return done
        }
        if start {
            if let frame = current { done.append(finished(frame, damaged: true)) }
            // Keyframe: the P bit of the frame's first byte is 0 (RFC 6386 9.1).
            current = Frame(timestamp: packet.timestamp, bytes: [], isKeyframe: data.first.map { $0 & 0x01 == 0 } ?? false, damaged: false)
        } else if current == nil {
            // The frame's start was lost: what follows of it is of no use.
            current = Frame(timestamp: packet.timestamp, bytes: [], isKeyframe: false, damaged: true)
        } else if gap {
            current?.damaged = true
        }
        if current?.damaged == false {
            if current!.bytes.count + data.count > maxBytes { current?.damaged = true } else { current?.bytes += data }
        }
        if packet.marker, let frame = current {
            done.append(finished(frame, damaged: frame.damaged))
            current = nil
        }
        return done
    }

    private func finished(_ f: Frame, damaged: Bool) -> Frame {
        var f = f
        f.damaged = f.damaged || damaged
        if f.damaged { f.bytes = [] }
        return f
    }
}
