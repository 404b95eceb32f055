import CFFmpeg

/// Audio frames whose sample buffers come from one `AVBufferPool`: in steady state no block is
/// allocated, a buffer returns to the pool when the last reference downstream lets go.
public final class AudioFramePool {
    public let format: AVSampleFormat
    public let channels: Int
    public let sampleRate: Int
    /// The most samples one frame can hold; a larger request grows the pool.
    public private(set) var capacity: Int
    private var pool: OpaquePointer?

    public init(format: AVSampleFormat, channels: Int, sampleRate: Int, capacity: Int = 1024) throws {
        self.format = format
        self.channels = channels
        self.sampleRate = sampleRate
        self.capacity = 0
        try grow(to: capacity)
    }

    deinit { av_buffer_pool_uninit(&pool) }

    private func grow(to samples: Int) throws {
        let size = av_samples_get_buffer_size(nil, Int32(channels), Int32(samples), format, 0)
        try AVFailure.check(size, "av_samples_get_buffer_size")
        // Buffers still out keep the old pool alive until they come back; then it frees itself.
        av_buffer_pool_uninit(&pool)
        guard let p = av_buffer_pool_init(Int(size), nil) else { throw MediaError("cannot create an audio buffer pool") }
        pool = p
        capacity = samples
    }

    /// A writable frame of `samples` samples (contents undefined) stamped `pts` in 1/sampleRate.
    public func frame(samples: Int, pts: Int64 = 0) throws -> Frame {
        if samples > capacity { try grow(to: max(samples, capacity * 2)) }
        guard let buf = av_buffer_pool_get(pool) else { throw MediaError("out of memory for an audio frame") }
        let f = av_frame_alloc()!
        f.pointee.format = format.rawValue
        f.pointee.sample_rate = Int32(sampleRate)
        av_channel_layout_default(&f.pointee.ch_layout, Int32(channels))
        f.pointee.nb_samples = Int32(samples)
        f.pointee.pts = pts
        f.pointee.buf.0 = buf
        let frame = Frame(owning: f, timeBase: Rational(1, sampleRate))
        frame.pointPlanes(at: buf.pointee.data, samples: samples)
        return frame
    }
}

extension Frame {
    public var sampleFormat: AVSampleFormat { AVSampleFormat(rawValue: av.pointee.format) }
    public var isPlanarAudio: Bool { SampleFormat.isPlanar(sampleFormat) }

    /// The frame's sample plane pointers (`extended_data`), as swresample and AVAudioFifo take them.
    public var audioPlanes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?> { av.pointee.extended_data }

    /// The samples of channel `channel` (planar) or of all channels interleaved (packed).
    public func audioData(_ channel: Int = 0) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(av.pointee.extended_data[isPlanarAudio ? channel : 0]!)
    }

    /// Points data/linesize/extended_data into one contiguous buffer holding every plane.
    func pointPlanes(at base: UnsafeMutablePointer<UInt8>, samples: Int) {
        let raw = UnsafeMutableRawPointer(av)
        let dataOffset = MemoryLayout<AVFrame>.offset(of: \AVFrame.data)!
        let lineOffset = MemoryLayout<AVFrame>.offset(of: \AVFrame.linesize)!
        let data = raw.advanced(by: dataOffset).assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
        let lines = raw.advanced(by: lineOffset).assumingMemoryBound(to: Int32.self)
        av_samples_fill_arrays(data, lines, base, Int32(channels), Int32(samples), sampleFormat, 0)
        av.pointee.extended_data = data
    }

    /// Shortens an audio frame in place (the tail of a pooled block left unused).
    public func setSampleCount(_ n: Int) { av.pointee.nb_samples = Int32(n) }
}
