/// Transport-wide congestion control feedback as a receiver gives it
/// (draft-holmer-rmcat-transport-wide-cc-extensions-01): each packet's transport-wide sequence
/// number (an RTP header extension) and arrival time recorded, and every few tens of
/// milliseconds an RTCP feedback (RTPFB, FMT 15) telling the sender which arrived and when, to
/// 250 µs. From it a browser's or OBS's sender sees the link's delay grow before loss, and
/// climbs to the rate the link carries instead of staying at its start rate. Sans-IO.
package struct TransportWideFeedback: Sendable {
    /// Arrival in microseconds, by extended sequence number.
    private var arrivals: [Int64: Int64] = [:]
    private var last: (sequence: UInt16, extended: Int64)?
    private var nextBase: Int64?
    private var feedbackCount: UInt8 = 0
    /// Packets one feedback covers at most (a burst after a stall goes in several).
    static let maxStatuses = 1000

    package init() {}

    package var isEmpty: Bool { arrivals.isEmpty }

    package mutating func received(sequence: UInt16, arrival seconds: Double) {
        let extended = last.map { $0.extended + Int64(Int16(bitPattern: sequence &- $0.sequence)) } ?? Int64(sequence)
        if last == nil || extended > last!.extended { last = (sequence, extended) }
        if nextBase == nil { nextBase = extended }
        guard extended >= nextBase!, arrivals.count < 4 * Self.maxStatuses else { return }
        arrivals[extended] = Int64((seconds * 1e6).rounded())
    }

    /// The transport-wide sequence number in a packet's header extension (RFC 8285, one- or
    /// two-byte form) with the negotiated `id`.
    package static func sequence(in packet: RtpPacket, id: UInt8) -> UInt16? {
        guard let profile = packet.extensionProfile else { return nil }
        let data = packet.extensionData
        var at = 0
        let twoByte = profile & 0xFFF0 == 0x1000
        guard profile == 0xBEDE || twoByte else { return nil }
        while at < data.count {
            if data[at] == 0 { at += 1; continue }  // padding
            let elementID = twoByte ? data[at] : data[at] >> 4
            if !twoByte && elementID == 15 { return nil }
            guard at + (twoByte ? 1 : 0) < data.count else { return nil }
            let length = twoByte ? Int(data[at + 1]) : Int(data[at] & 0x0F) + 1
            let start = at + (twoByte ? 2 : 1)
            guard start + length <= data.count else { return nil }
            if elementID == id, length >= 2 { return UInt16(data[start]) << 8 | UInt16(data[start + 1]) }
            at = start + length
        }
        return nil
    }

    /// The feedback for what arrived since the last one (nil: nothing new).
    package mutating func feedback(sender: UInt32, media: UInt32) -> [UInt8]? {
        guard let base = nextBase, let highest = last?.extended, highest >= base,
              let first = (base...highest).first(where: { arrivals[$0] != nil }), let firstArrival = arrivals[first] else { return nil }
        var end = min(highest, base + Int64(Self.maxStatuses) - 1)
        // The reference time in 64 ms steps (24 bits, wrapping); deltas count from it.
        let reference = firstArrival >= 0 ? firstArrival / 64_000 : (firstArrival - 63_999) / 64_000
        var previous = reference * 64_000
        var symbols: [UInt8] = []
        var deltas: [UInt8] = []
        var sequence = base
        while sequence <= end {
            guard let arrival = arrivals[sequence] else {
                symbols.append(0)
                sequence += 1
                continue
            }
            let units = Int64((Double(arrival - previous) / 250).rounded())
            if (0...255).contains(units) {
                symbols.append(1)
                deltas.append(UInt8(units))
            } else if let wide = Int16(exactly: units) {
                symbols.append(2)
                deltas += [UInt8(truncatingIfNeeded: wide >> 8), UInt8(truncatingIfNeeded: wide)]
            } else {
                // Too far from the last for one delta: the next feedback starts here with its own reference.
                end = sequence - 1
                break
            }
            previous += units * 250
            sequence += 1
        }
        guard !symbols.isEmpty else { return nil }
        var out: [UInt8] = [0x80 | 15, 205, 0, 0]
        func put(_ w: UInt32) { out += [UInt8(w >> 24), UInt8(w >> 16 & 0xFF), UInt8(w >> 8 & 0xFF), UInt8(w & 0xFF)] }
        put(sender)
        put(media)
        let baseSequence = UInt16(truncatingIfNeeded: base)
        out += [UInt8(baseSequence >> 8), UInt8(baseSequence & 0xFF), UInt8(symbols.count >> 8), UInt8(symbols.count & 0xFF)]
        let ref = UInt32(truncatingIfNeeded: reference) & 0xFF_FFFF
        put(ref << 8 | UInt32(feedbackCount))
        // Run-length chunks: T=0, the symbol, the run (up to 8191).
        var i = 0
        while i < symbols.count {
            var run = 1
            while i + run < symbols.count, symbols[i + run] == symbols[i], run < 8191 { run += 1 }
            let chunk = UInt16(symbols[i]) << 13 | UInt16(run)
            out += [UInt8(chunk >> 8), UInt8(chunk & 0xFF)]
            i += run
        }
        out += deltas
        // RFC 3550's padding: to 32 bits, the P bit set and the last byte counting it.
        let padding = (4 - out.count % 4) % 4
        if padding > 0 {
            out += [UInt8](repeating: 0, count: padding - 1) + [UInt8(padding)]
            out[0] |= 0x20
        }
        let words = out.count / 4 - 1
        out[2] = UInt8(words >> 8)
        out[3] = UInt8(words & 0xFF)
        feedbackCount &+= 1
        for s in base...end { arrivals[s] = nil }
        nextBase = end + 1
        return out
    }
}
