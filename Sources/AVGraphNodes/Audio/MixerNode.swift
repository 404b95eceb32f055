import AVGraph
import CFFmpeg
import Foundation

/// Mixes any number of raw audio inputs into one continuous output, the way a broadcast app
/// mixes app sound with the microphone. Every input is resampled to the output shape and
/// placed on the output timeline by its timestamps (sample index = time × rate): an input that
/// starts late, pauses or has gaps contributes silence there and never shifts another input.
/// Output comes in 1024-sample blocks; offline, a block goes out only once every open input has
/// covered it (so runs are deterministic); in realtime runs the clock also pushes blocks out a
/// little behind wall time, filling inputs that lag with silence. A look-ahead limiter
/// (PeakLimiter) holds the mix's true peak under `ceiling`, with room for a lossy encoder's
/// overshoot; it delays the signal by a few ms internally, never its timestamps.
public final class MixerNode: Filter, Node {
    public static let typeName = "mixer"
    public static let summary = "mixes audio inputs aligned by timestamp; silence for late or paused inputs; true-peak limiter"
    public static let inputs = [PadSpec("in", [.rawAudio], variadic: true, doc: "audio of any rate, channel count and sample format")]
    public static let outputs = [PadSpec("audio", [.rawAudio], doc: "fltp at 'rate' and 'channels', pts in samples")]
    static let rate = Setting.int("rate", 8000...384_000, default: 48000, doc: "output sample rate in Hz")
    static let channels = Setting.int("channels", 1...8, default: 2, doc: "output channel count (a mono input feeds every channel)")
    static let gain = Setting.gains("gain", live: true,
        doc: "gain per input, by upstream node name (or node.pad): {mic: 1.5, app: -6dB, phone.mic: 2}")
    static let mute = Setting.switches("mute", live: true, doc: "mute per input, by upstream node name (or node.pad): {mic: true}")
    static let latency = Setting.duration("latency", 0.02...5, default: "150ms",
        doc: "realtime runs: how far behind the clock output is forced out, filling late inputs with silence")
    static let tolerance = Setting.duration("tolerance", 0...1, default: "20ms",
        doc: "timestamp jitter absorbed without realigning an input; larger jumps become silence or are trimmed")
    static let lead = Setting.duration("lead", 0.05...30, default: "500ms",
        doc: "how far one input may run ahead of the slowest before the mixer stops taking it (bounds memory)")
    static let ceiling = Setting.gain("ceiling", default: "-2dB",
        doc: "true peak the limiter holds the mix under (look-ahead, inter-sample peaks included); -2 dBTP leaves AAC's overshoot room, so the decoded stream stays under -1 dBTP (EBU R128 for lossy delivery)")
    public static let options = [rate.spec, channels.spec, gain.spec, mute.spec, latency.spec, tolerance.spec, lead.spec, ceiling.spec]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let names = inputNames(n.inputs)
        for (option, keys) in [("gain", Array(n[Self.gain].keys)), ("mute", Array(n[Self.mute].keys))] {
            for key in keys.sorted() where !n.inputs.contains(where: { $0.isNamed(key) }) {
                throw NegotiationError("'\(key)' in '\(option)' is not an input of this mixer (inputs: \(names.joined(separator: ", ")))",
                                       option: option, hint: Suggest.hint(for: key, in: names) ?? "use the names listed in 'in:' (node, or node.pad)")
            }
        }
        for input in n.inputs {
            let f = input.format
            guard f.sampleRate > 0, (1...8).contains(f.channels), SampleFormat.named(f.sampleFormat) != nil else {
                throw NegotiationError("input '\(input.from)' gives audio the mixer cannot take (\(f))")
            }
        }
        return [.audio(sampleRate: n[Self.rate], channels: n[Self.channels], sampleFormat: "fltp")]
    }

    /// Converted samples of one input waiting on the output timeline.
    private struct Segment {
        let frame: Frame
        /// Output sample index of the first sample not yet mixed.
        var start: Int64
        /// Index in `frame` of that sample.
        var offset: Int
        var end: Int64 { start + Int64(frame.sampleCount - offset) }
    }

    private final class Input {
        let name: String
        var resampler: Resampler?
        var segments: [Segment] = []
        /// Where (fractional output samples) the next input sample belongs if the input is continuous.
        var expected: Double?
        /// Where the next converted sample goes; everything before it is known (data or silence).
        var writeIndex: Int64 = 0
        var ended = false
        var gain = 1.0
        var muted = false
        /// The gain used at the end of the last block; a change ramps from it over one block.
        var currentGain = 1.0
        /// Whether the input delivered since the last clock tick (realtime runs).
        var heardSinceTick = false
        /// Whether the input's producer is still there (live ingest sources say so).
        var presence: ProducerPresence?
        let source: Negotiation.Input
        init(_ source: Negotiation.Input, name: String) { self.source = source; self.name = name }
        var started: Bool { expected != nil }
        var target: Double { muted ? 0 : gain }
    }

    private let rate: Int
    private let channels: Int
    private let shape: AudioShape
    private let block = 1024
    private let latency: Double
    private let tolerance: Double
    private let lead: Int64
    private let pool: AudioFramePool
    private var inputs: [Input]
    /// Output index of the next block; nil until the timeline's start is known.
    private var next: Int64?
    private let limiter: PeakLimiter
    /// The output block being filled from the limiter (which runs `delay` samples behind the
    /// mix), and how much of it is filled; blocks keep their 1024 samples and timestamps.
    private var outBlock: (frame: Frame, filled: Int)?
    /// Output index of the limiter's next sample.
    private var limited: Int64?
    /// Where the media of producers that all left ends (realtime runs), while they are gone:
    /// `finish` fills the output up to it.
    private var tailUntil: Int64?

    public init(_ setup: NodeSetup) throws {
        rate = setup[Self.rate]
        channels = setup[Self.channels]
        shape = AudioShape(rate: rate, channels: channels, format: AV_SAMPLE_FMT_FLTP)
        latency = setup[Self.latency]
        tolerance = setup[Self.tolerance] * Double(rate)
        lead = Int64(setup[Self.lead] * Double(rate))
        pool = try AudioFramePool(format: AV_SAMPLE_FMT_FLTP, channels: channels, sampleRate: rate, capacity: block)
        limiter = PeakLimiter(channels: channels, rate: rate, ceiling: Float(min(setup[Self.ceiling], 1)))
        inputs = zip(setup.inputs, Self.inputNames(setup.inputs)).map { Input($0, name: $1) }
        for (i, input) in inputs.enumerated() {
            let f = setup.inputs[i].format
            if let s = try? AudioShape(f), s != shape { input.resampler = try Resampler(from: s, to: shape) }
        }
        for (name, g) in setup[Self.gain] { for i in inputs where i.source.isNamed(name) { i.gain = g; i.currentGain = g } }
        for (name, m) in setup[Self.mute] { for i in inputs where i.source.isNamed(name) { i.muted = m; i.currentGain = i.target } }
    }

    // MARK: input

    override public func receive(_ buffer: MediaBuffer, input index: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame, frame.sampleCount > 0 else { return }
        inputs[index].heardSinceTick = true
        inputs[index].presence = ProducerPresence.of(frame)
        try place(frame, on: inputs[index])
        try emitReady(out)
    }

    private func place(_ frame: Frame, on input: Input) throws {
        let frameShape = AudioShape(rate: frame.sampleRate, channels: frame.channels, format: frame.sampleFormat)
        if frameShape != (input.resampler?.input ?? shape) {
            try drain(input)
            input.resampler = frameShape == shape ? nil : try Resampler(from: frameShape, to: shape)
        }
        let ideal: Double
        if frame.pts != avg_nopts() {
            ideal = Double(frame.pts) * frame.timeBase.double * Double(rate)
        } else {
            ideal = input.expected ?? Double(next ?? 0)
        }
        if let expected = input.expected {
            if abs(ideal - expected) > tolerance {
                // A jump in the input's timeline: a gap becomes silence, an overlap is trimmed;
                // either way the filter must not smear across it.
                try drain(input)
                try input.resampler?.reset()
                input.writeIndex = Int64(ideal.rounded())
                input.expected = ideal
            }
        } else {
            input.writeIndex = Int64(ideal.rounded())
            input.expected = ideal
        }
        input.expected! += Double(frame.sampleCount) * Double(rate) / Double(frame.sampleRate)
        if let resampler = input.resampler {
            if let converted = try resampler.convert(frame) { append(converted, to: input) }
        } else {
            append(frame, to: input)
        }
    }

    /// Puts converted samples at the input's write position, dropping whatever falls on time
    /// already mixed or already covered by earlier data.
    private func append(_ frame: Frame, to input: Input) {
        let start = input.writeIndex
        input.writeIndex += Int64(frame.sampleCount)
        let floor = max(input.segments.last?.end ?? start, next ?? start)
        let skip = max(0, floor - start)
        guard skip < frame.sampleCount else { return }
        input.segments.append(Segment(frame: frame, start: start + skip, offset: Int(skip)))
    }

    private func drain(_ input: Input) throws {
        guard let resampler = input.resampler else { return }
        while let tail = try resampler.convert(nil) { append(tail, to: input) }
    }

    override public func inputEnded(_ index: Int, _ out: Outlet) throws {
        try drain(inputs[index])
        inputs[index].ended = true
        try emitReady(out)
    }

    override public func wantsInput(_ index: Int) -> Bool {
        let input = inputs[index]
        guard !input.ended else { return true }
        let open = inputs.filter { !$0.ended }
        let slowest = open.map(position).min() ?? 0
        return position(input) - slowest <= lead
    }

    private func position(_ input: Input) -> Int64 {
        input.started ? max(input.writeIndex, next ?? input.writeIndex) : (next ?? 0)
    }

    // MARK: output

    override public func tick(_ out: Outlet) throws {
        try emitReady(out)
        for input in inputs { input.heardSinceTick = false }
    }

    private func emitReady(_ out: Outlet) throws {
        var forcedUntil: Int64? = out.realtime ? Int64(((out.clock - latency) * Double(rate)).rounded(.down)) : nil
        // An input that delivered since the last tick is live, perhaps only behind (this thread
        // was held up and its buffers wait in the queue): the clock never forces past what it has
        // given, or its queued audio would be cut. An input that has gone quiet gets silence.
        if let f = forcedUntil {
            // (Audio already behind the output is lost either way and holds nothing back.)
            forcedUntil = inputs.filter { $0.heardSinceTick && !$0.ended && $0.writeIndex > (next ?? .min) }.map(\.writeIndex).reduce(f, min)
            // A network publisher that is there sends its audio in bursts: the clock waits for
            // it up to its lag (then it has stopped sending audio and gets silence).
            for input in inputs where input.started && !input.ended {
                guard let presence = input.presence, presence.audioLag > 0, presence.mediaEnd == nil else { continue }
                forcedUntil = min(forcedUntil!, max(input.writeIndex, f - Int64(presence.audioLag * Double(rate))))
            }
            // Producers that all left (or whose inputs ended): silence only up to where their
            // media ended, until media after the gap comes; a run that ends now ends where the
            // sound did. Inputs that never started hold nothing back.
            let live = inputs.filter { $0.started && !$0.ended }
            if inputs.contains(where: { !$0.ended }), inputs.contains(where: { $0.presence != nil }),
               live.allSatisfy({ $0.presence?.mediaEnd != nil }) {
                let ends = live.compactMap { $0.presence?.mediaEnd }.map { Int64(($0 * Double(rate)).rounded()) }
                let written = inputs.filter(\.started).map(\.writeIndex)
                let mediaEnd = (ends + written).max() ?? f
                forcedUntil = min(forcedUntil!, mediaEnd)
                // Blocks are 21 ms: a run that ends now still fills the last one up to there, so
                // the sound ends where the pictures do.
                if mediaEnd <= f { tailUntil = mediaEnd }
            } else if live.contains(where: { $0.presence != nil && $0.presence?.mediaEnd == nil }) {
                // Back (media after the gap came): nothing to fill at the end.
                tailUntil = nil
            }
        }
        if next == nil {
            let starts = inputs.filter(\.started).map { $0.segments.first?.start ?? $0.writeIndex }
            let allKnown = inputs.allSatisfy { $0.started || $0.ended }
            guard let first = starts.min(), allKnown || forcedUntil != nil else { return }
            next = first
        }
        // With every input ended there is nothing left to wait for: `finish` writes the tail.
        while let b = next, inputs.contains(where: { !$0.ended }) {
            let e = b + Int64(block)
            let covered = inputs.allSatisfy { $0.ended || ($0.started && $0.writeIndex >= e) }
            guard covered || (forcedUntil.map { e <= $0 } ?? false) else { break }
            try mix(from: b, count: block, out)
        }
    }

    override public func finish(_ out: Outlet) throws {
        let mediaTail = tailUntil ?? 0
        for input in inputs where !input.ended {
            try drain(input)
            input.ended = true
        }
        try emitReady(out)
        let end = max(inputs.compactMap { $0.segments.last?.end }.max() ?? 0, mediaTail)
        while let b = next, b < end {
            try mix(from: b, count: Int(min(Int64(block), end - b)), out)
        }
        guard limited != nil else { return }
        let tail = try pool.frame(samples: limiter.delay)
        let planes = (0..<channels).map { tail.audioData($0).assumingMemoryBound(to: Float.self) }
        try emitLimited(planes, count: limiter.flush(into: planes), out)
        if let (frame, filled) = outBlock, filled > 0 {
            frame.av.pointee.nb_samples = Int32(filled)
            out.emit(frame)
        }
        outBlock = nil
    }

    /// Moves `count` limited samples into output blocks, emitting each block once full.
    private func emitLimited(_ planes: [UnsafeMutablePointer<Float>], count: Int, _ out: Outlet) throws {
        var done = 0
        while done < count {
            if outBlock == nil { outBlock = (try pool.frame(samples: block, pts: limited!), 0) }
            let (frame, filled) = outBlock!
            let n = min(count - done, block - filled)
            for c in 0..<channels {
                (frame.audioData(c).assumingMemoryBound(to: Float.self) + filled).update(from: planes[c] + done, count: n)
            }
            done += n
            limited! += Int64(n)
            if filled + n == block {
                out.emit(frame)
                outBlock = nil
            } else {
                outBlock = (frame, filled + n)
            }
        }
    }

    private func mix(from b: Int64, count n: Int, _ out: Outlet) throws {
        let frame = try pool.frame(samples: n, pts: b)
        let e = b + Int64(n)
        var planes: [UnsafeMutablePointer<Float>] = []
        for c in 0..<channels {
            let p = frame.audioData(c).assumingMemoryBound(to: Float.self)
            p.initialize(repeating: 0, count: n)
            planes.append(p)
        }
        for input in inputs {
            let from = input.currentGain, to = input.target
            input.currentGain = to
            if from == 0 && to == 0 {
                consume(input, upTo: e)
                continue
            }
            let step = (to - from) / Double(n)
            for segment in input.segments where segment.start < e {
                let lo = max(segment.start, b), hi = min(segment.end, e)
                guard lo < hi else { continue }
                let src0 = segment.offset + Int(lo - segment.start), dst0 = Int(lo - b), count = Int(hi - lo)
                for c in 0..<channels {
                    let src = segment.frame.audioData(c).assumingMemoryBound(to: Float.self) + src0
                    let dst = planes[c] + dst0
                    if step == 0 {
                        let g = Float(to)
                        for k in 0..<count { dst[k] += g * src[k] }
                    } else {
                        for k in 0..<count { dst[k] += Float(from + step * Double(dst0 + k)) * src[k] }
                    }
                }
            }
            consume(input, upTo: e)
        }
        next = e
        if limited == nil { limited = b }
        try emitLimited(planes, count: limiter.process(planes, count: n), out)
    }

    private func consume(_ input: Input, upTo e: Int64) {
        var drop = 0
        for i in input.segments.indices {
            if input.segments[i].end <= e { drop += 1; continue }
            if input.segments[i].start < e {
                input.segments[i].offset += Int(e - input.segments[i].start)
                input.segments[i].start = e
            }
            break
        }
        input.segments.removeFirst(drop)
    }

    // MARK: live options

    override public func set(option: String, to value: OptionValue) throws {
        switch (option, value) {
        case ("gain", .perInput(let map)):
            try validate(map.keys, option)
            for (name, v) in map {
                guard case .number(let g) = v else { throw MediaError("gain for '\(name)' must be a gain like -6dB or 0.5") }
                for i in inputs where i.source.isNamed(name) { i.gain = g }
            }
        case ("gain", .number(let g)):
            for i in inputs { i.gain = g }
        case ("mute", .perInput(let map)):
            try validate(map.keys, option)
            for (name, v) in map {
                guard case .bool(let m) = v else { throw MediaError("mute for '\(name)' must be true or false") }
                for i in inputs where i.source.isNamed(name) { i.muted = m }
            }
        case ("mute", .bool(let m)):
            for i in inputs { i.muted = m }
        case ("gain", _), ("mute", _):
            throw MediaError("'\(option)' takes a mapping from input name to value, like {mic: \(option == "gain" ? "-6dB" : "true")}")
        default:
            throw MediaError("option '\(option)' of mixer cannot be changed while running (live: gain, mute)")
        }
    }

    /// How the inputs are named to a user: by upstream node, or `node.pad` where one node feeds several.
    static func inputNames(_ inputs: [Negotiation.Input]) -> [String] {
        inputs.map { i in inputs.filter { $0.from == i.from }.count > 1 ? i.qualifiedName : i.from }
    }

    private func validate(_ names: Dictionary<String, OptionValue>.Keys, _ option: String) throws {
        let known = Self.inputNames(inputs.map(\.source))
        for name in names where !inputs.contains(where: { $0.source.isNamed(name) }) {
            let hint = Suggest.hint(for: name, in: known).map { "; \($0)" } ?? ""
            throw MediaError("'\(option)': the mixer has no input '\(name)' (inputs: \(known.joined(separator: ", ")))\(hint)")
        }
    }
}
