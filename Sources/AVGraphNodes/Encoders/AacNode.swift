import AVGraph
import CFFmpeg
import Foundation

/// AAC-LC with libavcodec's native `aac` encoder, fed by `AudioEncoderFeed` (converted to fltp at
/// the encoder's rate and channels, cut into the 1024-sample frames AAC codes, pts on the input
/// timeline, gaps as silence). `passthrough: auto` sends a network source's own AAC on instead.
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

    private let feed: AudioEncoderFeed
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
        feed = try AudioEncoderFeed(AudioEncoder(codec: "aac", rate: f.sampleRate, channels: f.channels, bitrate: setup[Self.bitrate]))
        accounts = setup[Self.passthrough] == .auto
        if accounts { forwarding = AacForwarding() }
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame, frame.sampleCount > 0 else { return }
        if let forwarding {
            let encoder = feed.encoder
            if let stream = try forwarding.stream(for: frame, shape: encoder.shape, ours: encoder.stream), let source = frame.source {
                let sent = source.packet.restamped(pts: feed.pass(frame), stream: stream)
                sent.av.pointee.duration = Int64(frame.sampleCount)
                out.emit(sent)
                passed += 1
                out.report("passed_through", Double(passed))
                return
            }
            // Encoding from here on, continuous with what was sent: an AAC encoder's first packet
            // primes it (it starts a frame early), and would overlap the last packet sent on.
            if let why = forwarding.refusal { out.warning("passthrough: \(why); the audio is encoded from \(frame.seconds) s") }
            self.forwarding = nil
            if let nextPts = feed.nextPts { encodedFrom = nextPts }
        }
        emitEncoded(try feed.encode(frame, out), out)
    }

    private func emitEncoded(_ packets: [Packet], _ out: Outlet) {
        for packet in packets where packet.pts >= encodedFrom {
            out.emit(packet)
            encoded += 1
        }
        if accounts { out.report("encoded", Double(encoded)) }
    }

    override public func finish(_ out: Outlet) throws {
        emitEncoded(try feed.finish(), out)
        if accounts {
            out.event(PassthroughEvent(passed: passed, encoded: encoded, spans: encoded > 0 ? 1 : 0, maxOverstay: 0))
        }
    }
}

extension AacNode: DeclaresBitrate {
    public static func bitrateCeiling(_ options: OptionValues) -> Int? { options[bitrate] }
}
