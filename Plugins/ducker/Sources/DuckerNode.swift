import AVGraph
import CFFmpeg
import Foundation

/// Lowers `main` (game or app sound) while `key` (the microphone) carries speech-level signal.
///
/// The key is measured in 10 ms windows; a window at or above `threshold` (dBFS RMS) counts as
/// speech and keeps the duck on for `hold` after it. The gain moves in dB, reaching `-depth`
/// in `attack` and coming back to 0 dB in `release`. Offline, main waits until the key has been
/// heard for the same stretch of media time (timestamps align them, as in the mixer); live,
/// main never waits and the latest known key state applies. Main keeps its format; the key is
/// only listened to.
public final class DuckerNode: Filter, Node, @unchecked Sendable {
    public static let typeName = "ducker"
    public static let summary = "lowers 'main' while 'key' (a microphone) has speech-level signal"
    public static let inputs = [
        PadSpec("main", [.rawAudio], doc: "the audio to lower (app or game sound)"),
        PadSpec("key", [.rawAudio], doc: "the audio that triggers it (the microphone); not passed on"),
    ]
    public static let outputs = [PadSpec("audio", [.rawAudio], doc: "main, lowered while the key speaks; same format as main")]
    static let threshold = Setting.number("threshold", -90...0, default: -40, live: true, doc: "key level (dBFS RMS over 10 ms) that counts as speech")
    static let depth = Setting.number("depth", 0...90, default: 12, live: true, doc: "how far main is lowered while the key speaks, in dB")
    static let attack = Setting.duration("attack", 0...5, default: "20ms", live: true, doc: "time to go all the way down once speech starts")
    static let release = Setting.duration("release", 0...30, default: "500ms", live: true, doc: "time to come back to full level after the hold")
    static let hold = Setting.duration("hold", 0...10, default: "200ms", live: true,
                                       doc: "how long the duck stays down after the key was last loud (bridges gaps between words)")
    public static let options = [threshold.spec, depth.spec, attack.spec, release.spec, hold.spec]
    public static let events: [any NodeEvent.Type] = [DuckingEvent.self]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let main = n.format(on: "main") else { throw NegotiationError("input 'main' is not connected", hint: "in: {main: app, key: mic}") }
        guard let key = n.format(on: "key") else { throw NegotiationError("input 'key' is not connected", hint: "in: {main: app, key: mic}") }
        for (pad, f) in [("main", main), ("key", key)] {
            guard f.sampleRate > 0, let fmt = SampleFormat.named(f.sampleFormat),
                  [AV_SAMPLE_FMT_U8, AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S32, AV_SAMPLE_FMT_S64, AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_DBL]
                      .contains(av_get_packed_sample_fmt(fmt)) else {
                throw NegotiationError("input '\(pad)' gives audio the ducker cannot read (\(f))")
            }
        }
        return [main]
    }

    var threshold: Double, depth: Double, attack: Double, release: Double, hold: Double
    let mainIndices: Set<Int>, keyIndices: Set<Int>
    let realtime: Bool

    /// Media time up to which the key has been heard, and whether it ended.
    var keyHeard = -Double.infinity
    var keyEnded = false
    /// Stretches of media time [start, end) where the key was loud (hold not yet added), oldest first.
    var loud: [(start: Double, end: Double)] = []
    /// End of the last complete key window, and whether it was loud.
    var measuredUntil = -Double.infinity
    var lastWindowLoud = false
    /// The key's current 10 ms window.
    var window: (start: Double, sum: Double, count: Int, length: Int)?
    /// Main frames waiting for the key to catch up (offline).
    var waiting: [Frame] = []
    var mainEnded = false
    /// The current gain of main, in dB (0 ... -depth).
    var gainDB = 0.0
    var ducking = false

    public init(_ setup: NodeSetup) throws {
        threshold = setup[Self.threshold]
        depth = setup[Self.depth]
        attack = setup[Self.attack]
        release = setup[Self.release]
        hold = setup[Self.hold]
        mainIndices = Set(setup.inputs.indices.filter { setup.inputs[$0].pad == "main" })
        keyIndices = Set(setup.inputs.indices.filter { setup.inputs[$0].pad == "key" })
        realtime = setup.realtime
    }

    override public func set(option: String, to value: OptionValue) throws {
        if let v = try Self.threshold.value(in: option, value) { threshold = v }
        else if let v = try Self.depth.value(in: option, value) { depth = v }
        else if let v = try Self.attack.value(in: option, value) { attack = v }
        else if let v = try Self.release.value(in: option, value) { release = v }
        else if let v = try Self.hold.value(in: option, value) { hold = v }
        else { throw MediaError("option '\(option)' cannot be changed while running") }
    }

    override public func wantsInput(_ input: Int) -> Bool {
        // Offline, main runs at most a second ahead of what the key has told.
        guard !realtime, mainIndices.contains(input), !keyEnded, let last = waiting.last else { return true }
        return last.seconds - max(keyHeard, waiting[0].seconds) < 1
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame, frame.sampleRate > 0 else { return }
        if keyIndices.contains(input) {
            listen(frame)
        } else {
            waiting.append(frame)
        }
        try flush(out)
    }

    override public func inputEnded(_ input: Int, _ out: Outlet) throws {
        if keyIndices.contains(input) { keyEnded = true }
        try flush(out)
    }

    override public func tick(_ out: Outlet) throws { try flush(out) }

    override public func finish(_ out: Outlet) throws {
        keyEnded = true
        try flush(out)
    }

    /// Measures the key in 10 ms windows and records where it was loud.
    func listen(_ frame: Frame) {
        let samples = AudioSamples(frame)
        let rate = Double(frame.sampleRate)
        let start = frame.seconds
        var i = 0
        while i < samples.count {
            if window == nil || window!.start + Double(window!.count) / rate < start + Double(i) / rate - 0.5 / rate {
                // A new window (or the key skipped ahead: a gap is silence).
                window = (start + Double(i) / rate, 0, 0, max(1, Int(rate / 100)))
            }
            let n = min(samples.count - i, window!.length - window!.count)
            var sum = 0.0
            for c in 0..<samples.channels { for k in i..<(i + n) { let x = samples.value(channel: c, index: k); sum += x * x } }
            window!.sum += sum / Double(max(samples.channels, 1))
            window!.count += n
            i += n
            if window!.count == window!.length {
                let w = window!
                let end = w.start + Double(w.length) / rate
                lastWindowLoud = AudioSamples.dBFS(sqrt(w.sum / Double(w.count))) >= threshold
                if lastWindowLoud {
                    if let last = loud.last, w.start - last.end < 0.001 { loud[loud.count - 1].end = end } else { loud.append((w.start, end)) }
                }
                measuredUntil = end
                window = nil
            }
        }
        keyHeard = max(keyHeard, start + Double(samples.count) / rate)
    }

    func speaking(at t: Double) -> Bool {
        while let first = loud.first, first.end + hold < t - 1 { loud.removeFirst() }
        // Past the last measured window (the key's block is still being heard, or live main runs
        // ahead of the key), the latest known state holds.
        if t >= measuredUntil, lastWindowLoud, !keyEnded || t < keyHeard { return true }
        return loud.contains { $0.start <= t && t < $0.end + hold }
    }

    func flush(_ out: Outlet) throws {
        while let frame = waiting.first {
            let end = frame.seconds + Double(frame.sampleCount) / Double(frame.sampleRate)
            guard realtime || keyEnded || end <= keyHeard else { return }
            waiting.removeFirst()
            try duck(frame, out)
            out.emit(frame)
        }
    }

    /// Applies the gain curve to one main frame, in place.
    func duck(_ frame: Frame, _ out: Outlet) throws {
        let rate = Double(frame.sampleRate)
        let down = attack > 0 ? depth / (attack * rate) : .infinity
        let up = release > 0 ? depth / (release * rate) : .infinity
        var samples: AudioSamples?
        // Speech is looked up per 1 ms: fine enough for a 20 ms attack, cheap enough per sample.
        let step = max(1, Int(rate / 1000))
        var on = ducking
        for i in 0..<frame.sampleCount {
            if i % step == 0 {
                let t = frame.seconds + Double(i) / rate
                on = speaking(at: t)
                if on != ducking {
                    ducking = on
                    out.event(DuckingEvent(mediaTime: t, on: on))
                }
            }
            let target = on ? -depth : 0
            if gainDB > target { gainDB = max(target, gainDB - down) } else if gainDB < target { gainDB = min(target, gainDB + up) }
            if gainDB == 0 { continue }
            if samples == nil {
                try frame.makeWritable()
                samples = AudioSamples(frame)
            }
            let g = pow(10, gainDB / 20)
            for c in 0..<samples!.channels { samples!.set(channel: c, index: i, samples!.value(channel: c, index: i) * g) }
        }
    }
}
