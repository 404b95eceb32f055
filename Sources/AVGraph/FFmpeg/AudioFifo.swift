import CFFmpeg

/// An `AVAudioFifo`: re-chunks audio into the block size an encoder wants.
public final class AudioFifo {
    private let fifo: OpaquePointer
    public let format: AVSampleFormat
    public let channels: Int

    public init(format: AVSampleFormat, channels: Int, capacity: Int = 4096) throws {
        guard let f = av_audio_fifo_alloc(format, Int32(channels), Int32(capacity)) else {
            throw MediaError("cannot allocate an audio fifo")
        }
        fifo = f
        self.format = format
        self.channels = channels
    }

    deinit { av_audio_fifo_free(fifo) }

    public var count: Int { Int(av_audio_fifo_size(fifo)) }

    public func write(_ frame: Frame) throws {
        let n = frame.audioPlanes.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 8) {
            av_audio_fifo_write(fifo, $0, Int32(frame.sampleCount))
        }
        try AVFailure.check(n, "av_audio_fifo_write")
    }

    /// Moves up to `frame.sampleCount` samples into `frame`; returns how many.
    @discardableResult
    public func read(into frame: Frame) throws -> Int {
        let n = frame.audioPlanes.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 8) {
            av_audio_fifo_read(fifo, $0, Int32(frame.sampleCount))
        }
        try AVFailure.check(n, "av_audio_fifo_read")
        return Int(n)
    }
}
