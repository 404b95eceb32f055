import AVGraph
import CFFmpeg

/// Constant frame rate: output slot n is at n/rate and shows the latest input frame due by then
/// (half a slot of tolerance). Faster input is thinned; while the input stalls the last frame is
/// repeated (a still screen sends nothing: the timeline must have no holes), for at most `hold`
/// if one is set, after which the stream pauses (its timestamps jump). Every output is a
/// reference to an input picture with a new timestamp: nothing is copied.
final class FpsNode: Filter, Node {
    static let typeName = "fps"
    static let summary = "constant frame rate: drop extra frames, repeat the last one through stalls"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo], doc: "frames at exactly `rate`, pts in 1/rate")]
    static let rate = Setting<Rational?>.rate("rate", 0.1...240, required: true, doc: "output frame rate")
    static let hold = Setting<Double?>.duration("hold", 0...3600,
        doc: "while the input stalls, repeat the last frame for at most this long (0s: never repeat, leave a gap); unset: repeat it for as long as the stall lasts")
    static let options = [rate.spec, hold.spec]

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard var f = n.format(on: "video") else { throw NegotiationError("input 'video' is not connected") }
        guard let rate = n[Self.rate] else { throw NegotiationError("missing rate", option: "rate", hint: "write rate: 30") }
        f.frameRate = rate
        f.timeBase = rate.inverse
        return [f]
    }

    /// How long after a slot's time a realtime run waits for a late frame before repeating.
    static let latency = 0.1

    let rate: Rational
    let slotTimeBase: Rational
    /// Repeats allowed after a frame's own slot (unbounded unless `hold` is set).
    let holdSlots: Int64
    var current: Frame?
    var currentSlot: Int64 = 0
    var currentShown = false
    /// The next slot to fill.
    var next: Int64 = 0
    /// Pipeline clock when the current frame arrived (realtime runs).
    var arrivalClock: Double?
    /// Realtime: frames that came after a held gap, waiting while the repeats that fill the gap
    /// go out a few at a time (all at once, seconds of pictures would overrun the encoder's
    /// queue and the run's memory budget, and be dropped: a hole in the timeline).
    var pending: [Frame] = []
    /// Pictures queued downstream at once while repeats catch up (a gap, a stall's slots due at once).
    static let fillInFlight = 6
    /// Frames kept while a gap is filled (the oldest gives way; repeats cover its slot).
    static let pendingLimit = 8

    init(_ setup: NodeSetup) throws {
        rate = setup.outputs[0].frameRate
        slotTimeBase = rate.inverse
        let perSecond = rate.double
        holdSlots = setup[Self.hold].map { Int64(($0 * perSecond + 1e-6).rounded(.down)) } ?? .max
    }

    /// The first slot a frame at `t` seconds may fill: the one it is nearest to, ties to the earlier.
    func slot(of t: Double) -> Int64 { Int64((t * rate.double - 0.5 - 1e-9).rounded(.up)) }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        if out.realtime, current != nil, !pending.isEmpty || slot(of: frame.seconds) - next > Self.fillInFlight {
            pending.append(frame)
            if pending.count > Self.pendingLimit { pending.removeFirst() }
            fillGap(out)
            return
        }
        accept(frame, out)
    }

    private func accept(_ frame: Frame, _ out: Outlet) {
        let s = slot(of: frame.seconds)
        if current == nil {
            next = s
        } else {
            fill(before: s, out)
        }
        current = frame
        currentSlot = s
        currentShown = false
        if out.realtime {
            arrivalClock = out.clock
            // Live, a frame due now goes out now: waiting for its successor (to show the latest
            // frame of a slot) would hold every frame back one frame time. A frame whose slot a
            // repeat already covered (it came more than `latency` late) is not moved to the next
            // free slot: every later picture would then go out that much after its sound, for the
            // rest of the run. It waits as the current picture instead; the next frame replaces it
            // (the repeat stood in for it) or, if none comes, a repeat shows it. So the stream is
            // back on its own slots by the first frame that is on time.
            if s >= next { show(s, out) }
        }
    }

    /// Realtime: repeats up to the first pending frame's slot, only as many at once as the
    /// consumer has taken, then the pending frames.
    private func fillGap(_ out: Outlet) {
        while let first = pending.first {
            let s = slot(of: first.seconds)
            fill(before: s, out, paced: true)
            if next < s { return }
            pending.removeFirst()
            accept(first, out)
        }
    }

    /// Realtime: keep the stream going through a stall without waiting for the next frame.
    /// The stall is measured from the last arrival, so sources whose timestamps do not start at
    /// zero work too; repeats go out `latency` after their slot's time, and a network
    /// publisher's that much later again (its source's silence mark, which stops them, comes first).
    static func keepsDeadlines(options: OptionValues) -> Bool { true }

    override func tick(_ out: Outlet) throws {
        if !pending.isEmpty { return fillGap(out) }
        guard let current, let arrived = arrivalClock else { return }
        let presence = ProducerPresence.of(current)
        let waited = out.clock - arrived - Self.latency - (presence?.silenceMark ?? 0)
        guard waited > 0 else { return }
        var end = currentSlot + Int64((waited * rate.double).rounded(.down)) + 1
        // A producer that left: no repeat past the end of its media unless media after the gap
        // comes (then `receive` fills the gap); a run that ends now ends where the media did.
        if let mediaEnd = presence?.mediaEnd {
            end = min(end, Int64((mediaEnd * rate.double - 1e-6).rounded(.up)))
        }
        // Paced like a gap's filling: a producer that returns with its audio first makes seconds
        // of slots due at once, and each repeat counts its whole picture against the memory
        // budget, so an unpaced burst would take the encoder's queue over it and lose pictures.
        fill(before: end, out, stopAtHold: true, paced: true)
    }

    override func finish(_ out: Outlet) throws {
        for frame in pending { accept(frame, out) }
        pending.removeAll()
        guard current != nil else { return }
        // The last frame shows once more only if nothing showed it; never past its own slot.
        fill(before: currentSlot + 1, out)
        if !currentShown { show(next, out) }
        current = nil
    }

    /// Fills slots up to (not including) `end` with the current frame, as far as `hold` allows;
    /// past it the slots stay empty and the stream resumes at `end`. `paced`: stops early while
    /// `fillInFlight` pictures wait for the consumer (the caller goes on later).
    private func fill(before end: Int64, _ out: Outlet, stopAtHold: Bool = false, paced: Bool = false) {
        while next < end {
            if !currentShown || next - currentSlot <= holdSlots {
                if paced && out.backlog() >= Self.fillInFlight { return }
                show(next, out)
            } else {
                if !stopAtHold { next = end }
                return
            }
        }
    }

    private func show(_ slot: Int64, _ out: Outlet) {
        guard let current else { return }
        let f = current.ref()
        f.pts = slot
        f.timeBase = slotTimeBase
        f.av.pointee.pkt_duration = 1
        out.emit(f)
        currentShown = true
        next = slot + 1
    }
}
