/// A receiver's jitter buffer in its simplest useful form: RTP packets handed on in sequence
/// order, a hole held open for a retransmission (NACK) for at most `wait` seconds and then
/// skipped (the depacketizer sees the gap and marks its picture damaged). Sequence numbers wrap
/// (RFC 3550); at most `capacity` packets wait, past it the oldest hole is given up.
package struct RtpReorderBuffer: Sendable {
    package let wait: Double
    package let capacity: Int
    private var next: UInt16?
    private var held: [UInt16: (packet: RtpPacket, arrived: Double)] = [:]
    /// When the hole at `next` was first seen.
    private var holeSince: Double?
    package private(set) var skipped = 0

    package init(wait: Double = 0.2, capacity: Int = 512) {
        self.wait = wait
        self.capacity = capacity
    }

    /// Takes a packet; returns those now in order. A packet older than what was handed on is a
    /// late duplicate: dropped.
    package mutating func push(_ packet: RtpPacket, now: Double) -> [RtpPacket] {
        guard let expected = next else {
            next = packet.sequence &+ 1
            return [packet]
        }
        let ahead = Int16(bitPattern: packet.sequence &- expected)
        if ahead < 0 { return [] }
        held[packet.sequence] = (packet, now)
        return release(now: now)
    }

    /// Packets released because a hole waited long enough (call on a timer too).
    package mutating func release(now: Double) -> [RtpPacket] {
        var out: [RtpPacket] = []
        while var expected = next {
            if let p = held.removeValue(forKey: expected) {
                out.append(p.packet)
                next = expected &+ 1
                holeSince = nil
                continue
            }
            guard !held.isEmpty else { break }
            let since = holeSince ?? held.values.map(\.arrived).min() ?? now
            holeSince = since
            guard now - since >= wait || held.count > capacity else { break }
            // Give the hole up: on to the oldest packet held.
            let oldest = held.keys.min { Int16(bitPattern: $0 &- expected) < Int16(bitPattern: $1 &- expected) }!
            skipped += Int(oldest &- expected)
            expected = oldest
            next = expected
            holeSince = nil
        }
        return out
    }

    /// The sequence numbers missing before the newest packet held (what to NACK).
    package var missing: [UInt16] {
        guard let expected = next, !held.isEmpty else { return [] }
        let newest = held.keys.max { Int16(bitPattern: $0 &- expected) < Int16(bitPattern: $1 &- expected) }!
        var out: [UInt16] = []
        var s = expected
        while s != newest && out.count < 1000 {
            if held[s] == nil { out.append(s) }
            s &+= 1
        }
        return out
    }
}
