/// The negotiated format of one edge, as `check` propagates it and the runtime configures
/// nodes from it (GStreamer's caps, fixed before data flows).
public struct StreamFormat: Sendable, Equatable, CustomStringConvertible {
    public var kind: MediaKind
    public var width = 0
    public var height = 0
    /// FFmpeg pixel format name (`nv12`, `yuv420p`, ...).
    public var pixelFormat = ""
    public var frameRate = Rational(0, 1)
    public var sampleRate = 0
    public var channels = 0
    /// FFmpeg sample format name (`s16`, `fltp`, ...).
    public var sampleFormat = ""
    /// Codec name for encoded media (`h264`, `aac`).
    public var codec = ""
    public var timeBase = Rational(1, 1_000_000)
    /// The picture size can change mid-stream (an orientation schedule that turns the picture);
    /// `width`/`height` are then the first size. Only a `resize` makes it fixed again.
    public var sizeVaries = false
    /// Pictures may carry an orientation tag other than `up` (a phone's, a schedule's) that a
    /// consumer must still apply; `orient` and `resize` stand them upright.
    public var tagged = false
    /// Encoded media: the encoder's profile (`high`, `lc`) and target bit rate (0: quality-based).
    public var profile = ""
    public var bitRate = 0
    /// Encoded video: the encoder promises a keyframe exactly every this many seconds of media
    /// time from its first picture, and nowhere else (0: no promise, keyframes where it likes).
    /// A segmenting sink checks that its segment length is a multiple of it.
    public var keyframeSeconds = 0.0

    public init(kind: MediaKind) { self.kind = kind }

    public static func video(width: Int, height: Int, pixelFormat: String, frameRate: Rational) -> StreamFormat {
        var f = StreamFormat(kind: .rawVideo)
        f.width = width
        f.height = height
        f.pixelFormat = pixelFormat
        f.frameRate = frameRate
        f.timeBase = frameRate.num > 0 ? frameRate.inverse : Rational(1, 90_000)
        return f
    }

    public static func audio(sampleRate: Int, channels: Int, sampleFormat: String) -> StreamFormat {
        var f = StreamFormat(kind: .rawAudio)
        f.sampleRate = sampleRate
        f.channels = channels
        f.sampleFormat = sampleFormat
        f.timeBase = Rational(1, max(sampleRate, 1))
        return f
    }

    public var description: String {
        switch kind {
        case .rawVideo: return "raw video \(width)x\(height) \(pixelFormat) @ \(frameRate) fps"
        case .rawAudio: return "raw audio \(sampleRate) Hz \(channels) ch \(sampleFormat)"
        case .encodedVideo: return "\(codec) video \(width)x\(height) @ \(frameRate) fps"
        case .encodedAudio: return "\(codec) audio \(sampleRate) Hz \(channels) ch"
        }
    }
}
