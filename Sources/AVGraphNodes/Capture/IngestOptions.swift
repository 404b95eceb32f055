import AVGraph
import Foundation

/// Options and format rule shared by the ingest sources (`app`, `socket`): the media arrives
/// from outside, so the declared formats are what `check` propagates (the size a phone's screen
/// usually has); pictures keep the size and layout they arrive in (`sizeVaries`), and audio is
/// converted to the declared rate and channels on the source's own thread.
enum IngestOptions {
    static let size = Setting.size("size", default: "1170x2532",
        doc: "expected picture size (what check propagates; pictures keep the size they arrive in)")
    static let rate = Setting.rate("rate", 0.1...240, default: "30", doc: "expected frame rate (put an fps node after the source)")
    static let format = Setting.choice("format", PushPixelFormat.allCases.map(\.name), default: "nv12", doc: "expected pixel format")
    static let audioRate = Setting.int("audio-rate", 8000...384_000, default: 48000, doc: "sample rate of the audio outputs")
    static let audioChannels = Setting.int("audio-channels", 1...8, default: 2, doc: "channel count of the audio outputs")
    static let buffer = Setting.int("buffer", 1...64, default: 3, doc: "pictures queued between the producer and the pipeline")
    static let preallocate = Setting.bool("preallocate", default: true,
        doc: "allocate and touch `buffer` pictures of `size` at start, so copying pushes never fault pages; more are made ready off the push if a backlog needs them (false: producers that push without copying)")
    static let audioBuffer = Setting.duration("audio-buffer", 0.02...60, default: "1s", doc: "audio queued per source between the producer and the pipeline")

    /// The drop policy: each source type has its own default (an app refuses the new picture, a socket drops the oldest).
    static func drop(default policy: IngestDropPolicy) -> Setting<IngestDropPolicy> {
        Setting.choice("drop", default: policy,
                       doc: "when the picture queue is full: newest refuses the new picture, oldest drops the oldest queued one")
    }

    static func common(drop: Setting<IngestDropPolicy>) -> [OptionSpec] {
        [size.spec, rate.spec, format.spec, audioRate.spec, audioChannels.spec, buffer.spec, preallocate.spec, audioBuffer.spec, drop.spec]
    }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let size = n[Self.size]
        guard size.width >= 2, size.height >= 2 else {
            throw NegotiationError("size must be at least 2x2", option: "size")
        }
        var video = StreamFormat.video(width: size.width, height: size.height, pixelFormat: n[Self.format], frameRate: n[Self.rate])
        video.timeBase = Rational(1, 1_000_000)
        video.sizeVaries = true
        video.tagged = true
        let audio = StreamFormat.audio(sampleRate: n[Self.audioRate], channels: n[Self.audioChannels], sampleFormat: "flt")
        return [video, audio, audio]
    }

    static func hub(_ setup: NodeSetup, drop: Setting<IngestDropPolicy>) -> IngestHub {
        let hub = IngestHub(videoCapacity: setup[Self.buffer], audioCapacity: setup[Self.audioBuffer], policy: setup[drop])
        if setup[Self.preallocate], let format = PushPixelFormat.allCases.first(where: { $0.name == setup[Self.format] }) {
            let size = setup[Self.size]
            hub.prewarm(width: size.width, height: size.height, format: format)
        }
        return hub
    }
}
