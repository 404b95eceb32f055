/// HEVC out of RTP (RFC 7798, as WebRTC senders use it: no DONL, sprop-max-don-diff 0): single
/// NAL unit packets, aggregation packets (type 48) and fragmentation units (type 49), reassembled
/// into access units in Annex B (4-byte start codes), one per RTP timestamp, complete when the
/// marker bit says so or the timestamp moves on. PACI packets (type 50) are dropped. A keyframe
/// is an access unit with an IRAP NAL unit (types 16-21: BLA, IDR, CRA). An access unit with a
/// hole is handed on damaged and empty, for the caller to ask for a keyframe (PLI).
package struct H265Depacketizer: Sendable {
    package typealias Frame = RtpVideoFrame

    /// The NAL unit types this reads (ITU-T H.265 table 7-1, RFC 7798 4.4).
    enum UnitType {
        static let irap: ClosedRange<UInt8> = 16...21
        static let aggregation: UInt8 = 48
        static let fragmentation: UInt8 = 49
        static let paci: UInt8 = 50
    }

    /// The largest access unit taken (a stream sized to exhaust memory is cut off, damaged).
    package let maxBytes: Int
    private var timestamp: UInt32?
    private var bytes: [UInt8] = []
    private var isKeyframe = false
    private var damaged = false
    /// The NAL unit being joined from fragmentation units (its 2-byte header first).
    private var fragment: [UInt8]?
    private var lastSequence: UInt16?

    package init(maxBytes: Int = 8 << 20) { self.maxBytes = maxBytes }

    /// The type of the NAL unit whose 2-byte header starts at `first`.
    static func type(_ first: UInt8) -> UInt8 { first >> 1 & 0x3F }

    /// Takes one packet; returns the access units it completed (the previous one when the
    /// timestamp moved on without a marker, and this one when it carries the marker).
    package mutating func push(_ packet: RtpPacket) -> [Frame] {
        var done: [Frame] = []
        let gap = lastSequence.map { packet.sequence != $0 &+ 1 } ?? false
        lastSequence = packet.sequence
        if let ts = timestamp, ts != packet.timestamp {
            // Ended without its marker: the hole before this packet may have taken its last NAL units.
            if gap { damaged = true }
            done.append(finish())
        }
        timestamp = packet.timestamp
        // A hole is this unit's too: it may have taken its first NAL units (the parameter sets).
        if gap { damaged = true; fragment = nil }
        take(packet.payload)
        if packet.marker { done.append(finish()) }
        return done
    }

    private mutating func take(_ payload: ArraySlice<UInt8>) {
        guard payload.count >= 2 else { damaged = true; return }
        let first = payload[payload.startIndex], second = payload[payload.startIndex + 1]
        switch Self.type(first) {
        case UnitType.aggregation:  // 16-bit sizes, then the NAL units (no DONL/DOND: sprop-max-don-diff is 0)
            var at = payload.startIndex + 2
            while at < payload.endIndex {
                guard payload.endIndex - at >= 2 else { damaged = true; return }
                let size = Int(payload[at]) << 8 | Int(payload[at + 1])
                at += 2
                guard size >= 2, payload.endIndex - at >= size else { damaged = true; return }
                append(nal: payload[at..<(at + size)])
                at += size
            }
        case UnitType.fragmentation:  // payload header, FU header (S, E, the NAL unit's type), the fragment
            guard payload.count >= 3 else { damaged = true; return }
            let fu = payload[payload.startIndex + 2]
            let start = fu & 0x80 != 0, end = fu & 0x40 != 0
            let body = payload.dropFirst(3)
            if start {
                if fragment != nil { damaged = true }
                // The NAL unit's header: the payload header (F, layer id, temporal id) with its type.
                fragment = [first & 0x81 | (fu & 0x3F) << 1, second] + body
            } else if fragment != nil {
                fragment! += body
                if fragment!.count > maxBytes { fragment = nil; damaged = true; return }
            } else {
                // The start was lost: the rest of this NAL unit is of no use.
                damaged = true
                return
            }
            if end, let nal = fragment {
                append(nal: nal[...])
                fragment = nil
            }
        case UnitType.paci:
            // Payload content information: nothing a decoder needs.
            return
        case 51...63:
            // Unspecified types: not a NAL unit any sender here writes.
            damaged = true
        default:
            append(nal: payload)
        }
    }

    private mutating func append(nal: ArraySlice<UInt8>) {
        // Nothing more is kept of a damaged unit (it goes out empty).
        guard !damaged, let first = nal.first else { return }
        guard bytes.count + nal.count + 4 <= maxBytes else { damaged = true; return }
        if UnitType.irap.contains(Self.type(first)) { isKeyframe = true }
        bytes += [0, 0, 0, 1]
        bytes += nal
    }

    /// The access unit so far as a frame, and a fresh start.
    private mutating func finish() -> Frame {
        // A fragment still open at the end lost its last piece.
        if fragment != nil { damaged = true }
        let whole = !damaged && !bytes.isEmpty
        let frame = Frame(timestamp: timestamp ?? 0, bytes: whole ? bytes : [], isKeyframe: isKeyframe, damaged: !whole)
        timestamp = nil
        bytes = []
        isKeyframe = false
        damaged = false
        fragment = nil
        return frame
    }
}
