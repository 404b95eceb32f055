import AVGraph
import Foundation

/// Options and format rule shared by the ingest sources (`app`, `socket`): the media arrives
/// from outside, so the declared formats are what `check` propagates (the size a phone's screen
/// usually has); pictures keep the size and layout they arrive in (`sizeVaries`), and audio is
/// converted to the declared rate and channels on the source's own thread.
enum IngestOptions {
    static func common(drop: IngestDropPolicy) -> [OptionSpec] {
        [
            OptionSpec("size", .size, default: "1170x2532",
                       doc: "expected picture size (what check propagates; pictures keep the size they arrive in)"),
            OptionSpec("rate", .rate(0.1...240), default: "30", doc: "expected frame rate (put an fps node after the source)"),
            OptionSpec("format", .choice(["nv12", "bgra", "yuv420p"]), default: "nv12", doc: "expected pixel format"),
            OptionSpec("audio-rate", .int(8000...384_000), default: "48000", doc: "sample rate of the audio outputs"),
            OptionSpec("audio-channels", .int(1...8), default: "2", doc: "channel count of the audio outputs"),
            OptionSpec("buffer", .int(1...64), default: "3", doc: "pictures queued between the producer and the pipeline"),
            OptionSpec("preallocate", .bool, default: "true",
                       doc: "allocate and touch `buffer` pictures of `size` at start, so copying pushes never fault pages; more are made ready off the push if a backlog needs them (false: producers that push without copying)"),
            OptionSpec("audio-buffer", .duration(0.02...60), default: "1s", doc: "audio queued per source between the producer and the pipeline"),
            OptionSpec("drop", .choice(IngestDropPolicy.allCases.map(\.rawValue)), default: drop.rawValue,
                       doc: "when the picture queue is full: newest refuses the new picture, oldest drops the oldest queued one"),
        ]
    }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let size = n.options.size("size"), size.width >= 2, size.height >= 2 else {
            throw NegotiationError("size must be at least 2x2", option: "size")
        }
        let rate = n.options.rate("rate") ?? Rational(30, 1)
        var video = StreamFormat.video(width: size.width, height: size.height, pixelFormat: n.options.string("format") ?? "nv12",
                                       frameRate: rate)
        video.timeBase = Rational(1, 1_000_000)
        video.sizeVaries = true
        let audio = StreamFormat.audio(sampleRate: n.options.int("audio-rate") ?? 48000, channels: n.options.int("audio-channels") ?? 2,
                                       sampleFormat: "flt")
        return [video, audio, audio]
    }

    static func hub(_ o: OptionValues, defaultDrop: IngestDropPolicy) -> IngestHub {
        let hub = IngestHub(videoCapacity: o.int("buffer") ?? 3, audioCapacity: o.duration("audio-buffer") ?? 1,
                            policy: IngestDropPolicy(rawValue: o.string("drop") ?? "") ?? defaultDrop)
        if o.bool("preallocate") || o["preallocate"] == nil, let size = o.size("size"), let format = PushPixelFormat.allCases.first(where: { $0.name == o.string("format") ?? "nv12" }) {
            hub.prewarm(width: size.width, height: size.height, format: format)
        }
        return hub
    }
}
