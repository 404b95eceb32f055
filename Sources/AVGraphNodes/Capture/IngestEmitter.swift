import AVGraph
import CFFmpeg
import Foundation
import Synchronization

/// The node side of an ingest source: maps producer timestamps onto the pipeline clock and
/// emits. Each producer session is anchored where it arrived (never before what was already
/// emitted), so a producer that reconnects continues the output timeline; within a session its
/// own timestamps keep audio and video in step. The anchor puts the session's pictures on the
/// frame grid of `rate`: `fps` and the encoder place pictures on that grid, so an anchor between
/// two slots would move every picture by up to half a frame against its sound, by a different
/// amount each run. A session's audio that comes before its first picture waits for it briefly
/// (`anchorWait`) so the anchor can be chosen with the picture in view. Audio is made continuous
/// per pad and converted to the pad's declared format when the producer's differs.
final class IngestEmitter {
    let audioShapes: [AudioShape?]
    /// Seconds between output frames (0: no grid to keep).
    let framePeriod: Double
    /// How long a new session's audio waits for the session's first picture (short against the
    /// mixer's `latency`, which the waiting audio must still meet).
    let anchorWait: Double
    /// Producer seconds to source-clock seconds, per session.
    private var anchor: (session: Int, offset: Double, onGrid: Bool)?
    /// The item being emitted came late after a silence and keeps its own time (see `place`).
    private var emittingLate = false
    /// The session whose producer was last taken as silent or gone: only its media can come late
    /// (another session is a return).
    private var silentSession: Int?
    /// How far behind the clock media that comes after a silence mark may be and still be a
    /// return (see `place`). Above a frame's and a burst's jitter; far below what the media held
    /// when a connection ends comes late by (a network source's `timeout`, a clean close's
    /// flush: 0.5 s and more).
    static let lateness = 0.2
    /// A new session's items (audio) waiting for its first picture.
    private var waiting: [IngestQueue.Item] = []
    private var lastVideo = -1.0
    /// Media may come in bursts behind the clock: a network publisher's (a socket's or the
    /// app's producer pushes as it goes, and must never wait for the node).
    private var catchesUp: Bool { presence.silenceMark > 0 }
    /// The last picture came more than `lateness` behind the clock (a burst catching up).
    private var videoBehind = false
    /// When the last picture that came behind the clock went out (see `paceCatchUp`).
    private var lastCatchUp: Double?
    private var lastEnd = 0.0
    /// Where the emitted media ends on the timeline downstream sees (the run cuts the time
    /// before its first media and paused spans out of what sources emit).
    private var emittedEnd = 0.0
    /// The same per output pad (nil: nothing emitted on it yet).
    private var padEnds: [Double?] = [nil, nil, nil]
    private var audioNext: [Int64?] = [nil, nil, nil]
    private var resamplers: [Resampler?] = [nil, nil, nil]
    private var reportedDrops = (video: 0, audio: 0)
    let hub: IngestHub
    /// Tagged on every frame emitted, so `fps` and `mixer` pad a gap only while the producer may return.
    let presence: ProducerPresence

    /// `audioLag`, `silenceMark`: see `ProducerPresence`.
    init(hub: IngestHub, outputs: [StreamFormat], audioLag: Double = 0, silenceMark: Double = 0) {
        self.hub = hub
        presence = ProducerPresence(audioLag: audioLag, silenceMark: silenceMark)
        audioShapes = outputs.map { $0.kind == .rawAudio ? try? AudioShape($0) : nil }
        let rate = outputs.first { $0.kind == .rawVideo }?.frameRate.double ?? 0
        framePeriod = rate > 0 ? 1 / rate : 0
        anchorWait = 0.1
    }

    /// Where an item that arrived at monotonic `arrival` is on the source clock (pushed before
    /// the run started: at its start).
    private func arrivalClock(_ item: IngestQueue.Item, _ out: Outlet) -> Double {
        max(0, out.sourceClock - max(0, Monotonic.now - item.arrival))
    }

    func emit(_ item: IngestQueue.Item, _ out: Outlet) throws {
        // Audio waiting for a picture of its session: settled once another session starts or
        // the wait is over (measured in arrivals, so a backlog in the queue does not end it).
        if let w = waiting.first, w.session != item.session || item.arrival - w.arrival >= anchorWait { try settle(out) }
        if let s = item.sourceTime, anchor?.session != item.session {
            if waiting.isEmpty { audioNext = [nil, nil, nil] }
            if item.pad != 0 && framePeriod > 0 {
                waiting.append(item)
                return
            }
            setAnchor(on: item, source: s, out)
            try flushWaiting(out)
        }
        try place(item, out)
        reportDrops(out)
    }

    /// The next item for the node, waiting for one, the end, a wake (a producer came or went,
    /// the run stops or changes an option), the pipeline's `duration` or the moment waiting
    /// audio is anchored on its own; `deadline` (monotonic) is the node's own.
    func next(_ out: Outlet, duration: Double?, deadline: Double? = nil) -> IngestQueue.Next {
        if !wakeRegistered {
            wakeRegistered = true
            let queue = hub.queue
            out.onWake { queue.wake() }
        }
        var due = deadline
        func earlier(_ t: Double?) { if let t { due = min(due ?? t, t) } }
        earlier(duration.map { Monotonic.now + max(0, $0 - out.clock) })
        earlier(waiting.first.map { $0.arrival + anchorWait })
        return hub.queue.next(until: due)
    }

    private var wakeRegistered = false

    /// Nothing arrived for a while (or the source ends): a session's audio that waited long
    /// enough for a picture is anchored on its own.
    func idle(_ out: Outlet) throws {
        if let first = waiting.first, Monotonic.now - first.arrival >= anchorWait { try settle(out) }
        reportDrops(out)
    }

    func finish(_ out: Outlet) throws {
        try settle(out)
        reportDrops(out)
    }

    deinit { presence.release() }

    /// The producer is gone and everything it sent is out: downstream padding stops at the end
    /// of its last media until media after the gap arrives.
    func producerLeft(_ out: Outlet) throws {
        try settle(out)
        silentSession = anchor?.session
        presence.left(mediaEnd: emittedEnd)
    }

    /// The producer is connected but sends nothing (a network publisher stalled or died before
    /// its connection says so): downstream padding stops at the end of its last media, as if it
    /// left; media after the gap fills it. False while a new session's audio waits for its first
    /// picture (its anchor is not chosen yet: the mark is tried again later).
    /// The edge is where the track that ends first ends: a muxer sends one track ahead of the
    /// other (MPEG-TS audio comes in PES packets of 150-200 ms, behind the pictures), and padding
    /// the other up to it would cover media still on its way, which then comes too late to be
    /// mixed. Once the producer is taken as gone (`producerLeft`), both go to the later end.
    func producerSilent() -> Bool {
        guard waiting.isEmpty else { return false }
        silentSession = anchor?.session
        presence.left(mediaEnd: silentEdge)
        return true
    }

    private func emitted(_ end: Double, pad: Int) {
        emittedEnd = max(emittedEnd, end)
        padEnds[pad] = max(padEnds[pad] ?? end, end)
    }

    /// Where a silent producer's media ends for the nodes that pad (see `producerSilent`).
    private var silentEdge: Double { padEnds.compactMap { $0 }.min() ?? emittedEnd }

    private func settle(_ out: Outlet) throws {
        guard let first = waiting.first, let s = first.sourceTime else { return }
        setAnchor(on: first, source: s, out)
        try flushWaiting(out)
    }

    private func flushWaiting(_ out: Outlet) throws {
        let items = waiting
        waiting.removeAll()
        for w in items { try place(w, out) }
    }

    /// Anchors `item`'s session: the item goes where it arrived, later than anything emitted
    /// (including the audio waiting with it); a picture lands on the frame grid.
    private func setAnchor(on item: IngestQueue.Item, source s: Double, _ out: Outlet) {
        let earliest = (waiting.compactMap(\.sourceTime) + [s]).min()!
        let floor = lastEnd - earliest
        var offset = max(arrivalClock(item, out) - s, floor)
        if item.pad == 0 && framePeriod > 0 {
            // The grid slot at or before the arrival (nothing waits for its time), unless that
            // would overlap what was emitted: then the next one.
            let slot = (s + offset) / framePeriod
            offset = (slot + 1e-6).rounded(.down) * framePeriod - s
            if offset < floor - 1e-9 { offset = (slot - 1e-6).rounded(.up) * framePeriod - s }
        }
        anchor = (item.session, offset, item.pad == 0 || framePeriod == 0)
        videoBehind = false
    }

    /// A session anchored on its audio (the picture came later than `anchorWait`): its first
    /// picture moves the session's offset forward by less than a frame so the pictures sit on
    /// the grid, and its audio moves with it (that much silence goes in before the audio goes
    /// on). Left alone, `fps` would round every picture of the session to the nearest slot: a
    /// constant offset of up to half a frame, by a different amount each run. So producer time
    /// maps to run time by one rule for audio and video alike, whichever comes first. (Downstream
    /// nodes absorb a jump under 20 ms as jitter, so the silence has to be real samples.)
    private func putOnGrid(_ s: Double, _ out: Outlet) throws {
        guard var a = anchor, !a.onGrid else { return }
        let t = s + a.offset
        var shift = (t / framePeriod - 1e-6).rounded(.up) * framePeriod - t
        if t + shift <= lastVideo { shift += framePeriod }
        a.offset += shift
        a.onGrid = true
        anchor = a
        for pad in audioNext.indices {
            guard let next = audioNext[pad], pad < audioShapes.count, let shape = audioShapes[pad] else { continue }
            let samples = Int((shift * Double(shape.rate)).rounded())
            guard samples > 0 else { continue }
            let silence = try Self.silence(shape, samples: samples, pts: next)
            audioNext[pad] = next + Int64(samples)
            lastEnd = max(lastEnd, Double(next + Int64(samples)) / Double(shape.rate))
            presence.tag(silence)
            out.emit(silence, output: pad)
            emitted(Double(silence.pts + Int64(samples)) / Double(shape.rate), pad: pad)
        }
    }

    private func place(_ item: IngestQueue.Item, _ out: Outlet) throws {
        let arrival = arrivalClock(item, out)
        var t = arrival
        emittingLate = false
        if let s = item.sourceTime, item.pad == 0, anchor?.session == item.session { try putOnGrid(s, out) }
        if let s = item.sourceTime, let a = anchor {
            t = s + a.offset
            // Media that was on its way when the producer fell silent (the last PES packet an
            // MPEG-TS demuxer holds, the pictures in the decoder's threads: out only when the
            // connection ends, seconds later) belongs after the last media, where its time puts
            // it. It is no return: the edge stays where the mark put it. Taken as one, it would
            // let `fps` and `mixer` pad up to the clock until the next silence mark, padding the
            // seconds before the verdict into the recording. Nor does the edge follow it: the
            // edge is read by nodes downstream the moment it moves, while the media that moved it
            // still waits in their queues (a publisher that sends in bursts, GStreamer's srtsink
            // every ~0.8 s: the mixer filled 0.3 s of silence over the first beep, then dropped
            // it as already mixed); each takes late media as it comes, after its own last.
            // Late is measured against the clock, not `arrival`: a network reader stamps when
            // media was sent.
            emittingLate = presence.mediaEnd != nil && item.session == silentSession && t < out.sourceClock - Self.lateness
            if !emittingLate && (t < arrival - 1.0 || t > arrival + 10.0) {
                // A producer clock that fell far behind (or leapt ahead): anchor it again here.
                anchor = nil
                setAnchor(on: item, source: s, out)
                t = s + anchor!.offset
            }
        }
        if item.pad == 0 {
            if t <= lastVideo { t = lastVideo + 0.001 }
            lastVideo = t
            lastEnd = max(lastEnd, t + framePeriod)
            let frame = item.frame
            frame.timeBase = Rational(1, 1_000_000)
            frame.pts = Int64((t * 1e6).rounded())
            videoBehind = catchesUp && t < out.sourceClock - Self.lateness
            if !emittingLate { presence.returned() }
            presence.tag(frame)
            paceCatchUp(t, out)
            out.emit(frame, output: 0)
            // Read back: the outlet moved it onto the emitted timeline (frames are not written downstream).
            emitted(frame.seconds + framePeriod, pad: 0)
        } else {
            try emitAudio(item.frame, pad: item.pad, at: t, out)
        }
    }

    /// Pictures that come behind the clock in a burst (a publisher that sends in bursts:
    /// GStreamer's srtsink, 0.5-0.8 s of media every ~0.8 s) go out one at a time and no faster
    /// than twice their rate: live picture queues hold a few pictures and drop the oldest, so a
    /// burst handed on at once lost 16-24 of 180 pictures at a `resize` after the source. Bounded:
    /// a pipeline that cannot keep up still drops rather than falling further behind.
    private func paceCatchUp(_ t: Double, _ out: Outlet) {
        guard catchesUp, out.realtime, framePeriod > 0, t < out.sourceClock - framePeriod else {
            lastCatchUp = nil
            return
        }
        let now = Monotonic.now
        let giveUp = now + 2 * framePeriod
        if let last = lastCatchUp, last + framePeriod / 2 > now { out.waitUntil(monotonic: last + framePeriod / 2) }
        out.waitForBacklog(output: 0, until: giveUp)
        lastCatchUp = Monotonic.now
    }

    private func emitAudio(_ input: Frame, pad: Int, at t: Double, _ out: Outlet) throws {
        guard pad < audioShapes.count, let target = audioShapes[pad] else { return }
        let rate = target.rate
        let wanted = Int64((max(0, t) * Double(rate)).rounded())
        var pts = wanted
        if let next = audioNext[pad], abs(wanted - next) <= Int64(rate / 50) {
            // Within 20 ms of where the last block ended: continue seamlessly. Further off either
            // way, the block goes where its time says (a gap stays a gap; an overlap is the
            // mixer's to trim), so the error never grows past 20 ms.
            pts = next
        } else if audioNext[pad] != nil {
            try resamplers[pad]?.reset()
        }
        var frame = input
        let shape = AudioShape(rate: input.sampleRate, channels: input.channels, format: input.sampleFormat)
        if let old = resamplers[pad], old.input != shape {
            // The producer changed its rate or channels (ReplayKit's app audio does): the last
            // samples of the old shape are still in its resampler's filter. Out first, where they
            // belong, or the change would be a hole of a few samples and a click.
            resamplers[pad] = nil
            if pts == audioNext[pad] {
                while let tail = try old.convert(nil) { pts = emitSamples(tail, pad: pad, at: pts, out) }
            }
        }
        let relaidOnly = shape.rate == target.rate && shape.channels == target.channels
        // Samples still to decode (no node reads them) that would only be re-laid go on as they
        // are: whoever decodes them takes them as the decoder lays them out.
        if shape != target && !(relaidOnly && input.awaitsSamples) {
            // A frame that does not decode is left out, as a decoding source skips a damaged packet.
            do { try input.loadSamples() } catch { return }
            if resamplers[pad] == nil { resamplers[pad] = try Resampler(from: shape, to: target) }
            guard let converted = try resamplers[pad]!.convert(input) else { return }
            // Only the sample layout changed: the same samples, so still the network source's
            // packet (what `aac passthrough: auto` sends on).
            if relaidOnly, converted.sampleCount == input.sampleCount {
                converted.source = input.source
            }
            frame = converted
        }
        _ = emitSamples(frame, pad: pad, at: pts, out)
    }

    /// Emits converted audio at `pts` (samples at the pad's rate); returns where it ends.
    private func emitSamples(_ frame: Frame, pad: Int, at pts: Int64, _ out: Outlet) -> Int64 {
        let rate = frame.sampleRate
        frame.timeBase = Rational(1, rate)
        frame.pts = pts
        let end = pts + Int64(frame.sampleCount)
        audioNext[pad] = end
        lastEnd = max(lastEnd, Double(end) / Double(rate))
        // Sound on time while the pictures still catch up does not end a silence: `fps` would
        // repeat the last picture it has over the pictures still on their way to it.
        if !emittingLate && !videoBehind { presence.returned() }
        presence.tag(frame)
        out.emit(frame, output: pad)
        emitted(Double(frame.pts + Int64(frame.sampleCount)) / Double(rate), pad: pad)
        return end
    }

    // MARK: - A stand-in while the producer is away (`AwayStandIn`)

    /// Seconds between a stand-in's pictures: the frame grid, or 30 a second without one.
    var standInPeriod: Double { framePeriod > 0 ? framePeriod : 1.0 / 30 }

    /// Source-clock time of the stand-in's next picture: the slot after the last picture emitted.
    var nextStandInSlot: Double { lastVideo < 0 ? 0 : lastVideo + standInPeriod }

    /// Whether the producer's media has a place on the timeline (false from `standInBegins` until
    /// media after it arrives and is anchored).
    var isAnchored: Bool { anchor != nil }

    /// A stand-in begins: whatever the producer sends after it, late media of the session that
    /// went quiet or a new session, is anchored again after the stand-in's last media, not where
    /// its old offset would put it (under the stand-in's pictures).
    func standInBegins() {
        if waiting.isEmpty { anchor = nil }
        videoBehind = false
    }

    /// A picture the source made itself (`AwayStandIn`) at `t` on the frame grid, and silence on
    /// every audio pad up to where the picture ends: media of a producer that is there, so `fps`
    /// and `mixer` downstream take it as they take the producer's own. Paced like a burst when
    /// it starts behind the clock (the held seconds before the card).
    func emitStandIn(_ picture: Frame, at t: Double, _ out: Outlet) throws {
        let end = t + standInPeriod
        presence.returned()
        lastVideo = t
        lastEnd = max(lastEnd, end)
        picture.timeBase = Rational(1, 1_000_000)
        picture.pts = Int64((t * 1e6).rounded())
        presence.tag(picture)
        paceCatchUp(t, out)
        out.emit(picture, output: 0)
        emitted(picture.seconds + standInPeriod, pad: 0)
        for pad in audioShapes.indices { if let shape = audioShapes[pad] { try emitSilence(pad: pad, shape, until: end, out) } }
    }

    private func emitSilence(pad: Int, _ shape: AudioShape, until end: Double, _ out: Outlet) throws {
        let rate = Double(shape.rate)
        let to = Int64((end * rate).rounded())
        let from = audioNext[pad] ?? Int64((lastVideo * rate).rounded())
        let samples = Int(to - from)
        guard samples > 0 else { return }
        _ = emitSamples(try Self.silence(shape, samples: samples, pts: from), pad: pad, at: from, out)
    }

    private static func silence(_ shape: AudioShape, samples: Int, pts: Int64) throws -> Frame {
        let pool = try AudioFramePool(format: shape.format, channels: shape.channels, sampleRate: shape.rate, capacity: samples)
        let silence = try pool.frame(samples: samples, pts: pts)
        av_samples_set_silence(silence.audioPlanes, 0, Int32(samples), Int32(shape.channels), shape.format)
        return silence
    }

    /// Drops the queue made are counted in `stats` under this node.
    func reportDrops(_ out: Outlet) {
        let c = hub.queue.counts
        out.countDropped(c.video - reportedDrops.video, kind: .rawVideo)
        out.countDropped(c.audio - reportedDrops.audio, kind: .rawAudio)
        reportedDrops = c
    }
}
