import AVGraph
import CFFmpeg
import Foundation

/// AAC-LC with libavcodec's native `aac` encoder. Input of another shape is converted first
/// (swresample to fltp at the encoder's rate and channels); an audio fifo cuts it into the
/// 1024-sample frames AAC codes. Packet pts follow the input timeline; a gap in the input
/// becomes silence so the stream stays continuous and in sync.
public final class AacNode: Filter, Node {
    public static let typeName = "aac"
    public static let summary = "AAC-LC audio encoder (libavcodec aac)"
    public static let inputs = [PadSpec("in", [.rawAudio])]
    public static let outputs = [PadSpec("audio", [.encodedAudio], doc: "AAC packets, time base 1/rate, extradata for MP4")]
    static let bitrate = Setting.bitrate("bitrate", 8000...512_000, default: "128k", doc: "target bit rate")
    enum Passthrough: String, CaseIterable, Sendable { case off, auto }
    static let passthrough = Setting.choice("passthrough", default: Passthrough.off,
        doc: "auto: while the audio reaching this encoder is a network source's (rtmp) own AAC, unchanged (no mixer, no resampling between), its packets go out as they came instead of being decoded audio encoded again (when no other node reads the source's audio, the source does not decode it); from the first frame that is not, every frame is encoded")
    public static let options = [bitrate.spec, passthrough.spec]
    public static let events: [any NodeEvent.Type] = [PassthroughEvent.self]
    /// Sending the source's packets on needs none of their samples: the source need not decode them.
    public static func readsSamples(input: Int, options: OptionValues) -> Bool { options[passthrough] != .auto }
    /// Passthrough hands the source's packets on.
    public static func sharesProducerThread(options: OptionValues) -> Bool { options[passthrough] == .auto }
    /// Sample rates AAC can signal; anything else is resampled to 48 kHz.
    static let rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let f = n.format(on: "in") else { throw NegotiationError("aac needs an audio input") }
        guard (1...8).contains(f.channels) else { throw NegotiationError("aac encodes 1 to 8 channels, the input has \(f.channels)") }
        guard SampleFormat.named(f.sampleFormat) != nil else { throw NegotiationError("aac cannot take sample format '\(f.sampleFormat)'") }
        var out = StreamFormat(kind: .encodedAudio)
        out.codec = "aac"
        out.sampleRate = rates.contains(f.sampleRate) ? f.sampleRate : 48000
        out.channels = f.channels
        out.sampleFormat = "fltp"
        out.timeBase = Rational(1, out.sampleRate)
        out.profile = "lc"
        out.bitRate = n[Self.bitrate]
        return [out]
    }

    private let encoder: AudioEncoder
    private let fifo: AudioFifo
    private let pool: AudioFramePool
    private var resampler: Resampler?
    private var inputShape: AudioShape?
    private var nextPts: Int64?
    /// Where (encoder samples) the next input frame belongs if the input is continuous.
    private var expected: Double = 0
    private let tolerance: Double
    /// `passthrough: auto` while the source's packets are sent on (nil: encoding).
    private var forwarding: AacForwarding?
    /// Encoded packets before this pts overlap packets already sent on (the encoder's priming).
    private var encodedFrom = Int64.min
    /// `passthrough: auto`'s account: frames sent as the source's packets, frames encoded.
    private let accounts: Bool
    private var passed = 0
    private var encoded = 0

    public init(_ setup: NodeSetup) throws {
        let f = setup.outputs[0]
        encoder = try AudioEncoder(codec: "aac", rate: f.sampleRate, channels: f.channels, bitrate: setup[Self.bitrate])
        fifo = try AudioFifo(format: AV_SAMPLE_FMT_FLTP, channels: f.channels, capacity: 4 * encoder.frameSize)
        pool = try AudioFramePool(format: AV_SAMPLE_FMT_FLTP, channels: f.channels, sampleRate: f.sampleRate, capacity: encoder.frameSize)
        tolerance = 0.02 * Double(f.sampleRate)
        accounts = setup[Self.passthrough] == .auto
        if accounts { forwarding = AacForwarding() }
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame, frame.sampleCount > 0 else { return }
        if let forwarding {
            if let stream = try forwarding.stream(for: frame, shape: encoder.shape, ours: encoder.stream), let source = frame.source {
                place(frame)
                let sent = source.packet.restamped(pts: nextPts!, stream: stream)
                sent.av.pointee.duration = Int64(frame.sampleCount)
                nextPts! += Int64(frame.sampleCount)
                out.emit(sent)
                passed += 1
                out.report("passed_through", Double(passed))
                return
            }
            // Encoding from here on, continuous with what was sent: an AAC encoder's first packet
            // primes it (it starts a frame early), and would overlap the last packet sent on.
            if let why = forwarding.refusal { out.warning("passthrough: \(why); the audio is encoded from \(frame.seconds) s") }
            self.forwarding = nil
            if let nextPts { encodedFrom = nextPts }
        }
        do { try frame.loadSamples() } catch {
            // A source frame that does not decode is left out (the next one after it fills the gap with silence).
            out.warning("a source audio frame at \(frame.seconds) s to encode did not decode (\(error)); it is left out")
            return
        }
        let frameShape = AudioShape(rate: frame.sampleRate, channels: frame.channels, format: frame.sampleFormat)
        if frameShape != inputShape {
            try drainResampler()
            inputShape = frameShape
            resampler = frameShape == encoder.shape ? nil : try Resampler(from: frameShape, to: encoder.shape)
        }
        let rate = Double(encoder.shape.rate)
        let ideal = frame.pts == avg_nopts() ? expected : Double(frame.pts) * frame.timeBase.double * rate
        if nextPts == nil {
            nextPts = Int64(ideal.rounded())
            expected = ideal
        } else if ideal - expected > tolerance {
            try drainResampler()
            try resampler?.reset()
            try writeSilence(Int((ideal - expected).rounded()))
            expected = ideal
        }
        expected += Double(frame.sampleCount) * rate / Double(frame.sampleRate)
        if let resampler {
            if let converted = try resampler.convert(frame) { try fifo.write(converted) }
        } else {
            try fifo.write(frame)
        }
        try encodeFull(out)
    }

    private func writeSilence(_ samples: Int) throws {
        guard samples > 0 else { return }
        let silence = try pool.frame(samples: samples)
        av_samples_set_silence(silence.audioPlanes, 0, Int32(samples), Int32(encoder.shape.channels), AV_SAMPLE_FMT_FLTP)
        try fifo.write(silence)
    }

    private func drainResampler() throws {
        guard let resampler else { return }
        while let tail = try resampler.convert(nil) { try fifo.write(tail) }
    }

    private func encodeFull(_ out: Outlet) throws {
        while fifo.count >= encoder.frameSize { try encodeChunk(encoder.frameSize, out) }
    }

    private func encodeChunk(_ n: Int, _ out: Outlet) throws {
        let frame = try pool.frame(samples: n, pts: nextPts ?? 0)
        try fifo.read(into: frame)
        nextPts = frame.pts + Int64(n)
        emitEncoded(try encoder.encode(frame), out)
    }

    private func emitEncoded(_ packets: [Packet], _ out: Outlet) {
        for packet in packets where packet.pts >= encodedFrom {
            out.emit(packet)
            encoded += 1
        }
        if accounts { out.report("encoded", Double(encoded)) }
    }

    /// Where a packet sent on belongs (encoder samples): next to the last one while the source
    /// is continuous, so its jittery millisecond stamps do not jitter the track; after a gap,
    /// where the source puts it (a gap stays a gap: nothing is encoded to fill it).
    private func place(_ frame: Frame) {
        let rate = Double(encoder.shape.rate)
        let ideal = Double(frame.pts) * frame.timeBase.double * rate
        if nextPts == nil || ideal - expected > tolerance {
            nextPts = Int64(ideal.rounded())
            expected = ideal
        }
        expected += Double(frame.sampleCount)
    }

    override public func finish(_ out: Outlet) throws {
        try drainResampler()
        try encodeFull(out)
        if fifo.count > 0 { try encodeChunk(fifo.count, out) }
        emitEncoded(try encoder.encode(nil), out)
        if accounts {
            out.event(PassthroughEvent(passed: passed, encoded: encoded, spans: encoded > 0 ? 1 : 0, maxOverstay: 0))
        }
    }
}

extension AacNode: DeclaresBitrate {
    public static func bitrateCeiling(_ options: OptionValues) -> Int? { options[bitrate] }
}
