import AVGraph
import AVGraphTransport
import CFFmpeg
import Foundation

/// Options and format rule shared by the network sources (`rtmp`, `srt` without `in:`): what
/// arrives is only known once a publisher connects, so the declared formats are what `check`
/// propagates; pictures keep the size they arrive in (`sizeVaries`), audio is converted to the
/// declared rate and channels on the source's own thread.
enum NetworkSourceOptions {
    static let outputs = [
        PadSpec("video", [.rawVideo], doc: "decoded pictures (their own size; orientation from the stream's display matrix), pts in µs; when no node downstream reads every picture (privacy into h264 passthrough), H.264 and HEVC (8-bit 4:2:0) pictures leave undecoded and are decoded only when a node asks"),
        PadSpec("audio", [.rawAudio], doc: "decoded audio, at audio-rate/audio-channels"),
    ]
    static let listen = Setting.bool("listen", default: false,
        doc: "true: avgraph is the server (binds the url's host and port and waits for a publisher); false: pulls the stream from a server")
    static let idle = Setting<Double?>.duration("idle", 0.1...86400,
        doc: "end the run when no publisher has been connected for this long (also before the first one); unset: wait for ever")
    static let timeout = Setting.duration("timeout", 1...120, default: "5s",
        doc: "a publisher that sends nothing for this long counts as gone (then: wait for it again)")
    static let size = Setting.size("size", default: "1280x720",
        doc: "the picture size check shows until a publisher sends its own; it sizes nothing: pictures keep the size they are sent in (a phone that turns changes it), an encoder with passthrough: auto takes that size, and a resize is what fixes one")
    static let buffer = Setting.int("buffer", 1...120, default: 8, doc: "decoded pictures queued between the network reader and the pipeline")
    static let backlog = Setting.byteSize("backlog", 1_000_000...1_000_000_000, default: "64MiB",
        doc: "compressed media held for the decoder while the pipeline is behind the publisher; past it packets are dropped (video up to its next keyframe) and counted as the source's drops")

    static func common() -> [OptionSpec] {
        [listen.spec, idle.spec, timeout.spec, size.spec, IngestOptions.rate.spec, IngestOptions.audioRate.spec,
         IngestOptions.audioChannels.spec, buffer.spec, IngestOptions.audioBuffer.spec, backlog.spec, AwaySettings.away.spec]
    }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let size = n[Self.size]
        guard size.width >= 2, size.height >= 2 else { throw NegotiationError("size must be at least 2x2", option: "size") }
        try AwaySettings.negotiate(n)
        var video = StreamFormat.video(width: size.width, height: size.height, pixelFormat: "yuv420p", frameRate: n[IngestOptions.rate])
        video.timeBase = Rational(1, 1_000_000)
        video.sizeVaries = true
        let audio = StreamFormat.audio(sampleRate: n[IngestOptions.audioRate], channels: n[IngestOptions.audioChannels], sampleFormat: "flt")
        return [video, audio]
    }

    /// The URL as events and logs show it: no stream key, password or passphrase.
    static func redacted(_ url: String) -> String { Redaction.url(url) }
}

/// How one network source type opens its input.
struct NetworkInput {
    var url: String
    /// libavformat's demuxer to use (`mpegts` for SRT), or nil to probe.
    var format: String?
    var options: [String: String]
    var listen: Bool
    var timeout: Double
    /// avgraph's own server (a listening `rtmp` source): it accepts, authenticates and hands
    /// over publishers; nil: libavformat opens `url`.
    var listener: PublisherHandoff?
    /// Pictures larger than this are refused (`max-size`).
    var maxSize = PictureSize(width: 3840, height: 2160)
    /// The publisher's in-band privacy switches (RTMP `onPrivacy`), applied to its pictures.
    var privacy = PrivacyTimeline()
    /// No node downstream reads every picture (`NodeSetup.pixelsOnRequest`): H.264 goes out as
    /// pictures still to decode, decoded only when a node asks (`PicturesOnRequest`).
    var pixelsOnRequest = false
    /// No node downstream reads every audio frame's samples (`NodeSetup.samplesOnRequest`): AAC-LC
    /// goes out as frames still to decode, timed by their packets (`SamplesOnRequest`).
    var samplesOnRequest = false
    /// The publisher's in-band switches come in the FLV's data tags (a stream `avgraph serve`
    /// relays), not from a listener of this source's own.
    var privacyInTags = false
}
