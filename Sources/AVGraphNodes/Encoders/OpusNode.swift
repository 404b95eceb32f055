import AVGraph
import CFFmpeg

/// Opus with libavcodec's `libopus` wrapper, fed by `AudioEncoderFeed` (converted to interleaved
/// float at 48 kHz, cut into frames of the chosen duration, pts on the input timeline, gaps as
/// silence). Always 48 kHz: Opus codes at 48 kHz internally and every container signals its
/// time in 48 kHz samples, so another rate would only resample twice.
public final class OpusNode: Filter, Node {
    public static let typeName = "opus"
    public static let summary = "Opus audio encoder (libopus), 48 kHz, mono or stereo"
    public static let inputs = [PadSpec("in", [.rawAudio])]
    public static let outputs = [PadSpec("audio", [.encodedAudio], doc: "Opus packets, time base 1/48000, extradata (OpusHead) for MP4 and Matroska")]
    static let bitrate = Setting.bitrate("bitrate", 6000...510_000, default: "96k",
        doc: "target bit rate (libopus: at most 256k a channel)")
    /// The frame durations libopus codes (opus 1.2 and later add 80 to 120 ms).
    enum FrameDuration: String, CaseIterable, Sendable {
        case ms2_5 = "2.5ms", ms5 = "5ms", ms10 = "10ms", ms20 = "20ms", ms40 = "40ms", ms60 = "60ms"
        case ms80 = "80ms", ms100 = "100ms", ms120 = "120ms"
        /// libopus's `frame_duration` option, in milliseconds.
        var milliseconds: String { String(rawValue.dropLast(2)) }
    }
    static let frame = Setting.choice("frame", default: FrameDuration.ms20,
        doc: "duration of one Opus frame (one packet): shorter lowers latency and costs bit rate; longer than 20 ms saves a little bit rate for speech")
    enum Application: String, CaseIterable, Sendable { case voip, audio, lowdelay }
    static let application = Setting.choice("application", default: Application.audio,
        doc: "voip: favours speech intelligibility; audio: faithfulness to the input (music, mixed content); lowdelay: only the lowest-delay modes (no speech mode)")
    public static let options = [bitrate.spec, frame.spec, application.spec]
    /// libopus refuses a bit rate above this per channel.
    static let channelCeiling = 256_000

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let f = n.format(on: "in") else { throw NegotiationError("opus needs an audio input") }
        guard (1...2).contains(f.channels) else {
            // Surround Opus is several coupled streams under a channel mapping family, with a
            // layout of its own in OpusHead; this node codes the one stream mono and stereo are.
            throw NegotiationError("opus encodes 1 or 2 channels, the input has \(f.channels)",
                                   hint: "put a resample node with channels: 2 (or 1) before it")
        }
        guard SampleFormat.named(f.sampleFormat) != nil else { throw NegotiationError("opus cannot take sample format '\(f.sampleFormat)'") }
        let bitrate = n[Self.bitrate]
        if bitrate > channelCeiling * f.channels {
            throw NegotiationError("libopus codes at most \(channelCeiling / 1000)k a channel; \(bitrate / 1000)k for \(f.channels) channel\(f.channels == 1 ? "" : "s") is above it",
                                   option: "bitrate", hint: "use \(channelCeiling * f.channels / 1000)k or less")
        }
        var out = StreamFormat(kind: .encodedAudio)
        out.codec = "opus"
        out.sampleRate = 48000
        out.channels = f.channels
        out.sampleFormat = "flt"
        out.timeBase = Rational(1, 48000)
        out.bitRate = bitrate
        return [out]
    }

    private let feed: AudioEncoderFeed

    public init(_ setup: NodeSetup) throws {
        let f = setup.outputs[0]
        // flt, not s16: the input is float more often than not, and s16 would cost its low bits.
        feed = try AudioEncoderFeed(AudioEncoder(codec: "libopus", rate: 48000, channels: f.channels, bitrate: setup[Self.bitrate],
                                                 format: AV_SAMPLE_FMT_FLT,
                                                 options: ["frame_duration": setup[Self.frame].milliseconds,
                                                           "application": setup[Self.application].rawValue]))
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame, frame.sampleCount > 0 else { return }
        for packet in try feed.encode(frame, out) { out.emit(packet) }
    }

    override public func finish(_ out: Outlet) throws {
        for packet in try feed.finish() { out.emit(packet) }
    }
}

extension OpusNode: DeclaresBitrate {
    public static func bitrateCeiling(_ options: OptionValues) -> Int? { options[bitrate] }
}
