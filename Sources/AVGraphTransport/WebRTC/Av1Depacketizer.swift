/// AV1 out of RTP (AOMedia's "RTP Payload Format For AV1" v1.0): each packet's aggregation
/// header (Z: its first OBU element continues the last packet's, Y: its last continues in the
/// next, W: how many elements, N: a new coded video sequence) and OBU elements (each after its
/// LEB128 length, but the W-th), fragments joined across packets, into one temporal unit per RTP
/// timestamp. The unit is handed on as MP4 and Matroska carry AV1 (the low-overhead bitstream
/// format), which is what libavcodec's decoders take: a temporal delimiter, then every OBU with
/// obu_has_size_field set and its size. Temporal delimiters, tile lists and padding are dropped
/// (RTP must not carry the first two). A unit with a hole, or an OBU whose start was lost, is
/// handed on marked damaged and empty, for the caller to ask for a keyframe.
package struct Av1Depacketizer: Sendable {
    package typealias Frame = RtpVideoFrame

    /// What the aggregation header says of one packet, and its OBU elements.
    struct Aggregate: Equatable {
        var continuesPrevious: Bool
        var continuesInNext: Bool
        var startsSequence: Bool
        var elements: [ArraySlice<UInt8>]
    }

    static let temporalDelimiter: [UInt8] = [0x12, 0x00]
    static let sequenceHeaderType: UInt8 = 1
    /// OBU types a receiver drops: the temporal delimiter (written anew), the tile list, padding.
    static let droppedTypes: Set<UInt8> = [2, 8, 15]

    package let maxBytes: Int
    private var timestamp: UInt32?
    private var bytes: [UInt8] = []
    private var fragment: [UInt8]?
    private var isKeyframe = false
    private var damaged = false
    private var lastSequence: UInt16?

    package init(maxBytes: Int = 8 << 20) { self.maxBytes = maxBytes }

    /// A LEB128 number at `at` (at most 8 bytes, under 2^32 as the payload format allows) and
    /// the index after it; nil: truncated or too large.
    static func leb128(_ p: ArraySlice<UInt8>, at start: Int) -> (value: Int, next: Int)? {
        var value = 0, at = start
        for shift in stride(from: 0, to: 56, by: 7) {
            guard at < p.endIndex else { return nil }
            let byte = p[at]
            at += 1
            value |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value <= Int(UInt32.max) ? (value, at) : nil }
        }
        return nil
    }

    static func leb128Bytes(_ value: Int) -> [UInt8] {
        var out: [UInt8] = [], rest = value
        repeat {
            let low = UInt8(rest & 0x7F)
            rest >>= 7
            out.append(rest > 0 ? low | 0x80 : low)
        } while rest > 0
        return out
    }

    /// The aggregation header and elements of a payload; nil: malformed (a length past the end,
    /// or fewer elements than W says).
    static func aggregate(_ p: ArraySlice<UInt8>) -> Aggregate? {
        guard let header = p.first else { return nil }
        let count = Int(header >> 4 & 0x03)
        var elements: [ArraySlice<UInt8>] = []
        var at = p.startIndex + 1
        while at < p.endIndex {
            if count != 0 && elements.count == count - 1 {
                // The W-th element has no length: the rest of the payload.
                elements.append(p[at...])
                at = p.endIndex
                break
            }
            guard let (length, next) = leb128(p, at: at), length <= p.endIndex - next else { return nil }
            elements.append(p[next..<(next + length)])
            at = next + length
        }
        guard count == 0 || elements.count == count, !elements.isEmpty else { return nil }
        return Aggregate(continuesPrevious: header & 0x80 != 0, continuesInNext: header & 0x40 != 0, startsSequence: header & 0x08 != 0,
                         elements: elements)
    }

    /// Takes one packet; returns the temporal units it completed (the previous one when the
    /// timestamp moved on without a marker).
    package mutating func push(_ packet: RtpPacket) -> [Frame] {
        var done: [Frame] = []
        let gap = lastSequence.map { packet.sequence != $0 &+ 1 } ?? false
        lastSequence = packet.sequence
        if let ts = timestamp, ts != packet.timestamp {
            // The unit ended without its marker: a hole before this packet may have taken it.
            if gap { damaged = true }
            done.append(finish())
        }
        let startsUnit = timestamp == nil
        timestamp = packet.timestamp
        guard let a = Self.aggregate(packet.payload) else {
            damaged = true
            fragment = nil
            if packet.marker { done.append(finish()) }
            return done
        }
        // A hole is this unit's unless the unit begins whole with this packet.
        if gap && !(startsUnit && !a.continuesPrevious) { damaged = true }
        if startsUnit && a.startsSequence { isKeyframe = true }
        for (index, element) in a.elements.enumerated() {
            if index == 0 && a.continuesPrevious {
                guard fragment != nil, !gap else {
                    // The OBU's start was lost: the rest of it is of no use.
                    damaged = true
                    fragment = nil
                    continue
                }
                fragment! += element
            } else {
                if fragment != nil { damaged = true }  // announced to continue, and did not
                fragment = Array(element)
            }
            if (fragment?.count ?? 0) > maxBytes {
                damaged = true
                fragment = nil
                continue
            }
            if index == a.elements.count - 1 && a.continuesInNext { continue }
            if let obu = fragment { append(obu: obu[...]) }
            fragment = nil
        }
        if packet.marker { done.append(finish()) }
        return done
    }

    /// One whole OBU into the unit, rewritten with its size field (the size it came with, if
    /// any, trusted only within the element).
    private mutating func append(obu: ArraySlice<UInt8>) {
        guard !damaged, let header = obu.first else { return }
        let type = header >> 3 & 0x0F, hasExtension = header & 0x04 != 0, hasSize = header & 0x02 != 0
        guard header & 0x80 == 0, obu.count >= (hasExtension ? 2 : 1) else { damaged = true; return }
        if Self.droppedTypes.contains(type) { return }
        var start = obu.startIndex + (hasExtension ? 2 : 1), end = obu.endIndex
        if hasSize {
            guard let (size, next) = Self.leb128(obu, at: start), size <= obu.endIndex - next else { damaged = true; return }
            start = next
            end = next + size
        }
        let size = Self.leb128Bytes(end - start)
        let total = (bytes.isEmpty ? Self.temporalDelimiter.count : 0) + (hasExtension ? 2 : 1) + size.count + (end - start)
        guard bytes.count + total <= maxBytes else { damaged = true; return }
        if bytes.isEmpty { bytes = Self.temporalDelimiter }
        bytes.append(header | 0x02)
        if hasExtension { bytes.append(obu[obu.startIndex + 1]) }
        bytes += size
        bytes += obu[start..<end]
    }

    /// The unit so far as a frame, and a fresh start.
    private mutating func finish() -> Frame {
        let whole = !damaged && fragment == nil && !bytes.isEmpty
        let frame = Frame(timestamp: timestamp ?? 0, bytes: whole ? bytes : [], isKeyframe: isKeyframe, damaged: !whole)
        timestamp = nil
        bytes = []
        fragment = nil
        isKeyframe = false
        damaged = false
        return frame
    }
}
