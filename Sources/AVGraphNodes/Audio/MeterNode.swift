import AVGraph
import CFFmpeg
import Foundation

/// Passes audio through untouched (the same frame reference) and reports its level: every
/// `interval` of media, a `level` event with RMS and peak in dBFS per channel.
public final class MeterNode: Filter, Node {
    public static let typeName = "meter"
    public static let summary = "passes audio through and emits level events (rms, peak in dBFS per channel)"
    public static let inputs = [PadSpec("in", [.rawAudio])]
    public static let outputs = [PadSpec("audio", [.rawAudio], doc: "the input, unchanged")]
    static let interval = Setting.duration("interval", 0.005...3600, default: "100ms", live: true, doc: "media time between level events")
    public static let options = [interval.spec]
    public static let events: [any NodeEvent.Type] = [LevelEvent.self]
    /// What silence reports, since JSON has no -infinity.
    public static let floorDB = -120.0

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let f = n.format(on: "in") else { throw NegotiationError("meter needs an audio input") }
        guard SampleFormat.named(f.sampleFormat) != nil else { throw NegotiationError("meter cannot read sample format '\(f.sampleFormat)'") }
        return [f]
    }

    private var interval: Double
    private var sumSquares: [Double] = []
    private var peaks: [Double] = []
    private var counted = 0
    private var windowStart: Double?

    public init(_ setup: NodeSetup) throws {
        interval = setup[Self.interval]
    }

    override public func set(option: String, to value: OptionValue) throws {
        guard let d = try Self.interval.value(in: option, value) else {
            throw MediaError("option '\(option)' of meter cannot be changed while running")
        }
        interval = d
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        if let frame = buffer.frame, frame.sampleCount > 0, frame.sampleRate > 0 { measure(frame, out) }
        out.emit(buffer)
    }

    private func measure(_ frame: Frame, _ out: Outlet) {
        let channels = frame.channels, rate = Double(frame.sampleRate)
        if sumSquares.count != channels {
            sumSquares = Array(repeating: 0, count: channels)
            peaks = Array(repeating: 0, count: channels)
            counted = 0
        }
        let reader = AudioSamples(frame)
        var i = 0
        while i < frame.sampleCount {
            if windowStart == nil { windowStart = frame.pts == avg_nopts() ? 0 : frame.seconds + Double(i) / rate }
            let windowLength = max(1, Int((interval * rate).rounded()))
            let n = min(frame.sampleCount - i, windowLength - counted)
            for c in 0..<channels {
                var sum = 0.0, peak = peaks[c]
                for k in i..<i + n {
                    let x = reader.value(channel: c, index: k)
                    sum += x * x
                    peak = max(peak, abs(x))
                }
                sumSquares[c] += sum
                peaks[c] = peak
            }
            counted += n
            i += n
            if counted >= windowLength {
                let dB = { (x: Double) in x > 0 ? max(Self.floorDB, 20 * log10(x)) : Self.floorDB }
                let rms = sumSquares.map { dB(sqrt($0 / Double(counted))) }
                let time = windowStart! + Double(counted) / rate
                out.event(LevelEvent(mediaTime: time, rms: rms, peak: peaks.map(dB)))
                for c in 0..<channels { sumSquares[c] = 0; peaks[c] = 0 }
                counted = 0
                windowStart = nil
            }
        }
    }
}
