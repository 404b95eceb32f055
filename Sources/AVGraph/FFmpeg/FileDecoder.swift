import CFFmpeg

/// A media file decoded in file order: pictures as the decoder gives them, audio converted to
/// one shape (interleaved, e.g. s16 stereo 48 kHz). Times are seconds from the file's start.
public final class FileDecoder {
    public enum Item {
        case video(Frame, time: Double)
        case audio(Frame, time: Double)
    }

    private let demuxer: Demuxer
    private let videoIndex: Int?
    private let audioIndex: Int?
    private let video: Decoder?
    private let audio: Decoder?
    private let videoTimeBase: Rational
    private let audioTimeBase: Rational
    private let audioShape: AudioShape
    private var resampler: Resampler?
    private var audioPosition: Int64?
    private let packet = av_packet_alloc()!
    private var pending: [Item] = []
    private var ended = false
    private let start: Double

    public init(path: String, audio shape: AudioShape) throws {
        demuxer = try Demuxer(path: path)
        videoIndex = demuxer.bestStream(AVMEDIA_TYPE_VIDEO)
        audioIndex = demuxer.bestStream(AVMEDIA_TYPE_AUDIO)
        guard videoIndex != nil || audioIndex != nil else { throw MediaError("'\(path)' has neither video nor audio") }
        let d = demuxer
        func open(_ i: Int?) throws -> (Decoder?, Rational) {
            guard let i else { return (nil, Rational(1, 1)) }
            let s = d.stream(i)
            let tb = Rational(s.pointee.time_base)
            return (try Decoder(parameters: s.pointee.codecpar, timeBase: tb), tb)
        }
        let v = try open(videoIndex), a = try open(audioIndex)
        video = v.0
        videoTimeBase = v.1
        audio = a.0
        audioTimeBase = a.1
        audioShape = shape
        start = Double(demuxer.startTime) / 1e6
    }

    deinit {
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
    }

    /// The next decoded item, or nil at the end of the file.
    public func next() throws -> Item? {
        while pending.isEmpty {
            if ended { return nil }
            if try demuxer.read(into: packet) {
                let i = Int(packet.pointee.stream_index)
                if i == videoIndex { try video!.send(packet); try collectVideo() }
                if i == audioIndex { try audio!.send(packet); try collectAudio() }
            } else {
                ended = true
                if let video { try video.send(nil); try collectVideo() }
                if let audio { try audio.send(nil); try collectAudio() }
            }
        }
        return pending.removeFirst()
    }

    private func collectVideo() throws {
        while let f = try video!.receive() {
            let frame = Frame(owning: f, timeBase: videoTimeBase)
            let pts = f.pointee.best_effort_timestamp != avg_nopts() ? f.pointee.best_effort_timestamp : f.pointee.pts
            pending.append(.video(frame, time: Double(pts) * videoTimeBase.double - start))
        }
    }

    private func collectAudio() throws {
        while let f = try audio!.receive() {
            let frame = Frame(owning: f, timeBase: audioTimeBase)
            if audioPosition == nil {
                let pts = f.pointee.pts != avg_nopts() ? f.pointee.pts : 0
                audioPosition = Int64(((Double(pts) * audioTimeBase.double - start) * Double(audioShape.rate)).rounded())
            }
            let shape = AudioShape(rate: frame.sampleRate, channels: frame.channels, format: frame.sampleFormat)
            if resampler?.input != shape { resampler = try Resampler(from: shape, to: audioShape) }
            guard let out = try resampler!.convert(frame) else { continue }
            let time = Double(audioPosition!) / Double(audioShape.rate)
            audioPosition! += Int64(out.sampleCount)
            pending.append(.audio(out, time: time))
        }
    }
}
