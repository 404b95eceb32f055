import AVGraph
import CFFmpeg
import Foundation

/// Changes any of sample rate, channel count and sample format (swresample); what is not given
/// passes through. Output pts continue from the first input pts by output sample count, and
/// re-anchor when the input's timeline jumps (a gap stays a gap).
public final class ResampleNode: Filter, Node {
    public static let typeName = "resample"
    public static let summary = "converts sample rate, channel count and sample format"
    public static let inputs = [PadSpec("in", [.rawAudio])]
    public static let outputs = [PadSpec("audio", [.rawAudio], doc: "pts in samples of the output rate")]
    static let rate = Setting<Int?>.int("rate", 1000...384_000, doc: "output sample rate in Hz (none: the input's)")
    static let channels = Setting<Int?>.int("channels", 1...8, doc: "output channel count (none: the input's)")
    static let format = Setting<String?>.choice("format", SampleFormat.all, doc: "output sample format, an FFmpeg name (none: the input's)")
    public static let options = [rate.spec, channels.spec, format.spec]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let f = n.format(on: "in") else { throw NegotiationError("resample needs an audio input") }
        guard SampleFormat.named(f.sampleFormat) != nil, (1...8).contains(f.channels) else {
            throw NegotiationError("resample cannot take \(f)")
        }
        return [.audio(sampleRate: n[Self.rate] ?? f.sampleRate, channels: n[Self.channels] ?? f.channels,
                       sampleFormat: n[Self.format] ?? f.sampleFormat)]
    }

    private let shape: AudioShape
    private var resampler: Resampler?
    private var inputShape: AudioShape?
    /// Output pts of the next converted sample.
    private var nextPts: Int64?
    /// Input time (output samples) where the next input frame belongs if the input is continuous.
    private var expected: Double = 0
    private let tolerance: Double

    public init(_ setup: NodeSetup) throws {
        shape = try AudioShape(setup.outputs[0])
        tolerance = 0.02 * Double(shape.rate)
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame, frame.sampleCount > 0 else { return }
        let frameShape = AudioShape(rate: frame.sampleRate, channels: frame.channels, format: frame.sampleFormat)
        if frameShape != inputShape {
            try drain(out)
            inputShape = frameShape
            resampler = frameShape == shape ? nil : try Resampler(from: frameShape, to: shape)
        }
        guard let resampler else {
            out.emit(buffer)
            return
        }
        let ideal = frame.pts == avg_nopts() ? expected : Double(frame.pts) * frame.timeBase.double * Double(shape.rate)
        if nextPts == nil || abs(ideal - expected) > tolerance {
            try drain(out)
            try resampler.reset()
            nextPts = Int64(ideal.rounded())
            expected = ideal
        }
        expected += Double(frame.sampleCount) * Double(shape.rate) / Double(frame.sampleRate)
        if let converted = try resampler.convert(frame) { send(converted, out) }
    }

    private func send(_ frame: Frame, _ out: Outlet) {
        frame.pts = nextPts ?? 0
        nextPts = frame.pts + Int64(frame.sampleCount)
        out.emit(frame)
    }

    private func drain(_ out: Outlet) throws {
        guard let resampler, nextPts != nil else { return }
        while let tail = try resampler.convert(nil) { send(tail, out) }
    }

    override public func finish(_ out: Outlet) throws { try drain(out) }
}
