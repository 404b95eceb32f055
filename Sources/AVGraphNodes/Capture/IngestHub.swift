import AVGraph
import CFFmpeg
import Foundation
import Synchronization

/// What a push did with a buffer: `taken` (queued for the pipeline), `dropped` (by the source's
/// drop policy: its queue was full, or the source has finished), `rejected` (the buffer itself
/// is unusable: empty, absurd size, missing planes).
public enum PushResult: String, Sendable, Equatable {
    case taken, dropped, rejected
}

/// Pixel layouts a producer may push (a phone's screen buffers are NV12 or BGRA).
public enum PushPixelFormat: UInt8, Sendable, CaseIterable {
    case nv12 = 1, bgra = 2, yuv420p = 3

    var av: AVPixelFormat {
        switch self {
        case .nv12: return AV_PIX_FMT_NV12
        case .bgra: return AV_PIX_FMT_BGRA
        case .yuv420p: return AV_PIX_FMT_YUV420P
        }
    }

    var name: String { "\(self)" }
}

/// Interleaved PCM layouts a producer may push; `bigEndian` is a separate flag.
public enum PushSampleFormat: UInt8, Sendable, CaseIterable {
    case s16 = 1, f32 = 2, s32 = 3

    var av: AVSampleFormat {
        switch self {
        case .s16: return AV_SAMPLE_FMT_S16
        case .f32: return AV_SAMPLE_FMT_FLT
        case .s32: return AV_SAMPLE_FMT_S32
        }
    }

    var bytesPerSample: Int { self == .s16 ? 2 : 4 }
}

/// The ingest side of one `app` or `socket` source: producers push from any thread, without
/// waiting; the one copy into a pooled frame happens here, then the frame is queued for the node.
/// Pools are kept per geometry, so after the first few buffers of a size nothing is allocated.
final class IngestHub: Sendable {
    static let maxDimension = 16384
    static let maxAudioBytes = 4 << 20

    let queue: IngestQueue
    /// In-band privacy switches, applied to each picture as it is pushed.
    let privacy: PrivacyTimeline
    private struct VideoKey: Hashable { var w: Int, h: Int, f: Int32 }
    private struct AudioKey: Hashable { var f: Int32, ch: Int, rate: Int }
    private struct Pools {
        var video: [VideoKey: (pool: BoundedFramePool, layout: PixelLayout)] = [:]
        var audio: [AudioKey: AudioFramePool] = [:]
        var firstKey: VideoKey?
    }
    /// Producers on any thread find or make their pool here.
    private let pools = Mutex(Pools())
    /// Pictures of one geometry that may be out at once: the queue plus what a graph holds between
    /// the source and its first scaling (two live lanes, sized by bytes as the runtime sizes them,
    /// and the pictures being worked on). Small pictures get more, full-size screens fewer.
    let videoCapacity: Int
    func picturesInFlight(bytes: Int) -> Int { videoCapacity + 2 * max(1, min(8, (6 << 20) / max(bytes, 1))) + 2 }

    init(videoCapacity: Int, audioCapacity: Double, policy: IngestDropPolicy, privacy: PrivacyTimeline = PrivacyTimeline()) {
        queue = IngestQueue(videoCapacity: videoCapacity, audioCapacity: audioCapacity, policy: policy)
        self.privacy = privacy
        self.videoCapacity = videoCapacity
    }

    /// Makes the pool for the expected geometry now, with as many buffers allocated and touched
    /// as the queue holds, so pushes copy into memory that is already mapped (a page fault per
    /// 4 kB would cost a 4 MB picture more than 1 ms); a backlog's extra buffers are made ready
    /// off the push (BoundedFramePool). Another geometry gets its pool on its first push.
    func prewarm(width: Int, height: Int, format: PushPixelFormat) {
        _ = try? videoPool(width: width, height: height, format: format.av, prewarm: true)
    }

    /// The pool for a geometry; one made on a push is not touched up front (that would take
    /// milliseconds inside the push): its first picture faults its pages instead.
    private func videoPool(width: Int, height: Int, format: AVPixelFormat, prewarm: Bool = false) throws -> (pool: BoundedFramePool, layout: PixelLayout) {
        let key = VideoKey(w: width, h: height, f: format.rawValue)
        let bytes = Int(av_image_get_buffer_size(format, Int32(width), Int32(height), 1))
        let limit = picturesInFlight(bytes: bytes)
        let warm = prewarm ? videoCapacity : 0
        return try pools.withLock { pools in
            if let p = pools.video[key] { return p }
            guard let layout = PixelLayout(format) else { throw MediaError("unsupported pixel format") }
            // Buffers still downstream keep an old pool alive until they come back. The expected
            // geometry's pool (made first) is kept; others replace each other.
            if pools.video.count >= 3, let other = pools.video.keys.first(where: { $0 != pools.firstKey }) { pools.video[other] = nil }
            if pools.firstKey == nil { pools.firstKey = key }
            let p = (try BoundedFramePool(width: width, height: height, pixelFormat: format, limit: limit, prewarm: warm), layout)
            pools.video[key] = p
            return p
        }
    }

    private func audioPool(format: AVSampleFormat, channels: Int, rate: Int) throws -> AudioFramePool {
        let key = AudioKey(f: format.rawValue, ch: channels, rate: rate)
        return try pools.withLock { pools in
            if let p = pools.audio[key] { return p }
            if pools.audio.count >= 8 { pools.audio.removeAll() }
            let p = try AudioFramePool(format: format, channels: channels, sampleRate: rate, capacity: 4096)
            pools.audio[key] = p
            return p
        }
    }

    /// Copies one picture into a pooled frame and queues it. Never waits.
    func pushVideo(format: PushPixelFormat, width: Int, height: Int, planes: [PlaneCopy.Plane], time: Double?,
                   orientation: Orientation, fullRange: Bool = false, session: Int = 0) -> PushResult {
        guard Self.isValidPicture(format, width: width, height: height, planes: planes, time: time) else { return .rejected }
        guard queue.hasRoomForVideo() else { queue.noteDropped(pad: 0); return .dropped }
        guard let (pool, layout) = try? videoPool(width: width, height: height, format: format.av),
              let frame = pool.frame(timeBase: Rational(1, 1_000_000), orientation: orientation) else {
            queue.noteDropped(pad: 0)
            return .dropped
        }
        PlaneCopy.copyPicture(planes, into: frame, layout: layout)
        Self.tagColor(frame, format, fullRange: fullRange)
        frame.privacy = privacy.mark(at: time)
        let item = IngestQueue.Item(pad: 0, frame: frame, sourceTime: time, arrival: Monotonic.now, session: session)
        return queue.push(item) ? .taken : .dropped
    }

    /// Queues one picture without copying it: the frame borrows the producer's planes and keeps
    /// `owner` alive until the pipeline lets go of the picture. Never waits.
    func pushBorrowedVideo(format: PushPixelFormat, width: Int, height: Int, planes: [PlaneCopy.Plane], owner: AnyObject,
                           time: Double?, orientation: Orientation, fullRange: Bool = false) -> PushResult {
        guard Self.isValidPicture(format, width: width, height: height, planes: planes, time: time) else { return .rejected }
        guard queue.hasRoomForVideo() else { queue.noteDropped(pad: 0); return .dropped }
        guard let frame = BorrowedPicture.frame(width: width, height: height, format: format.av, planes: planes, owner: owner,
                                                timeBase: Rational(1, 1_000_000), orientation: orientation) else { return .dropped }
        Self.tagColor(frame, format, fullRange: fullRange)
        frame.privacy = privacy.mark(at: time)
        let item = IngestQueue.Item(pad: 0, frame: frame, sourceTime: time, arrival: Monotonic.now, session: 0)
        return queue.push(item) ? .taken : .dropped
    }

    /// What a push must give for a picture to be taken at all: a sane size (even for YUV), the
    /// format's planes, a finite time.
    private static func isValidPicture(_ format: PushPixelFormat, width: Int, height: Int, planes: [PlaneCopy.Plane], time: Double?) -> Bool {
        let needed = format == .bgra ? 1 : format == .nv12 ? 2 : 3
        guard width > 0, height > 0, width <= maxDimension, height <= maxDimension, planes.count >= needed else { return false }
        if format != .bgra && (width % 2 != 0 || height % 2 != 0) { return false }
        return time?.isFinite ?? true
    }

    /// YUV from a capture API is BT.709, limited range unless the producer says full.
    private static func tagColor(_ frame: Frame, _ format: PushPixelFormat, fullRange: Bool) {
        guard format != .bgra else { return }
        frame.tagBT709Limited()
        if fullRange { frame.av.pointee.color_range = AVCOL_RANGE_JPEG }
    }

    /// Copies one block of interleaved PCM into a pooled frame (made native-endian) and queues it
    /// on `pad` (1 app, 2 mic). Never waits.
    func pushAudio(pad: Int, bytes: UnsafeRawPointer, byteCount: Int, format: PushSampleFormat, bigEndian: Bool,
                   rate: Int, channels: Int, time: Double?, session: Int = 0) -> PushResult {
        guard (8000...384_000).contains(rate), (1...8).contains(channels), byteCount > 0, byteCount <= Self.maxAudioBytes else {
            return .rejected
        }
        let frameBytes = channels * format.bytesPerSample
        guard byteCount % frameBytes == 0 else { return .rejected }
        if let time, !time.isFinite { return .rejected }
        let samples = byteCount / frameBytes
        guard queue.hasRoomForAudio(seconds: Double(samples) / Double(rate)) else { queue.noteDropped(pad: pad); return .dropped }
        guard let pool = try? audioPool(format: format.av, channels: channels, rate: rate),
              let frame = try? pool.frame(samples: samples) else { return .dropped }
        PlaneCopy.copySamples(bytes, byteCount: byteCount, into: frame)
        if bigEndian != PCM.hostIsBigEndian { PCM.swapBytes(frame.audioData(), byteCount: byteCount, sampleSize: format.bytesPerSample) }
        let item = IngestQueue.Item(pad: pad, frame: frame, sourceTime: time, arrival: Monotonic.now, session: session)
        return queue.push(item) ? .taken : .dropped
    }

    /// An in-band privacy switch: pictures pushed from now on whose time is at or after `time`
    /// (producer seconds; nil: every picture from the next) are covered (`on`) or not. False when
    /// refused (a non-finite time, an invalid card name, too many switches pending).
    func pushPrivacy(on: Bool, card: String?, time: Double?) -> Bool {
        if let card, !PrivacyMark.isValidCardName(card) { return false }
        return privacy.schedule(on: on, card: card, time: time)
    }

    func finish() { queue.end() }

    private let away = Atomic(false)
    /// An in-process producer said it stopped sending (`AppSource.leave()`); a push clears it.
    var producerAway: Bool {
        get { away.load(ordering: .sequentiallyConsistent) }
        set {
            away.store(newValue, ordering: .sequentiallyConsistent)
            if newValue { queue.wake() }
        }
    }
}
