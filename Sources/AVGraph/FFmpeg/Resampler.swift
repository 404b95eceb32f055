import CFFmpeg

/// Rate, channel count and sample format of raw audio.
public struct AudioShape: Sendable, Equatable, CustomStringConvertible {
    public var rate: Int
    public var channels: Int
    public var format: AVSampleFormat

    public init(rate: Int, channels: Int, format: AVSampleFormat) {
        self.rate = rate
        self.channels = channels
        self.format = format
    }

    public init(_ f: StreamFormat) throws {
        guard let fmt = SampleFormat.named(f.sampleFormat) else { throw MediaError("unknown sample format '\(f.sampleFormat)'") }
        self.init(rate: f.sampleRate, channels: f.channels, format: fmt)
    }

    public var description: String { "\(rate) Hz \(channels) ch \(SampleFormat.name(format))" }
}

/// One swresample context: any rate/channels/format in, one shape out, into pooled frames.
/// Channel layouts are FFmpeg's defaults for the counts; a mono source feeds every output
/// channel at full level (a microphone should sound as loud in stereo as it does alone).
public final class Resampler {
    public let input: AudioShape
    public let output: AudioShape
    private var swr: OpaquePointer?
    private let pool: AudioFramePool

    public init(from input: AudioShape, to output: AudioShape) throws {
        self.input = input
        self.output = output
        pool = try AudioFramePool(format: output.format, channels: output.channels, sampleRate: output.rate, capacity: 2048)
        var inLayout = AVChannelLayout(), outLayout = AVChannelLayout()
        av_channel_layout_default(&inLayout, Int32(input.channels))
        av_channel_layout_default(&outLayout, Int32(output.channels))
        defer { av_channel_layout_uninit(&inLayout); av_channel_layout_uninit(&outLayout) }
        try AVFailure.check(swr_alloc_set_opts2(&swr, &outLayout, output.format, Int32(output.rate),
                                                &inLayout, input.format, Int32(input.rate), 0, nil), "swr_alloc_set_opts2")
        if input.channels == 1 && output.channels > 1 {
            // swresample's default puts mono at -3 dB on each side; a mic should keep its level.
            var matrix = [Double](repeating: 0, count: output.channels)
            matrix[0] = 1
            matrix[1] = 1
            try AVFailure.check(swr_set_matrix(swr, matrix, 1), "swr_set_matrix")
        }
        try AVFailure.check(swr_init(swr), "swr_init")
    }

    deinit { swr_free(&swr) }

    /// Converts `frame`'s samples, or drains what is buffered when `frame` is nil. Returns nil when
    /// no sample came out yet (the filter keeps a few for the next call). The result has no pts.
    public func convert(_ frame: Frame?) throws -> Frame? {
        let inCount = frame?.sampleCount ?? 0
        let room = Int(swr_get_out_samples(swr, Int32(inCount))) + 16
        let out = try pool.frame(samples: room)
        let n: Int32
        if let frame {
            n = frame.audioPlanes.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) { inPlanes in
                swr_convert(swr, out.audioPlanes, Int32(room), inPlanes, Int32(inCount))
            }
        } else {
            n = swr_convert(swr, out.audioPlanes, Int32(room), nil, 0)
        }
        try AVFailure.check(n, "swr_convert")
        guard n > 0 else { return nil }
        out.setSampleCount(Int(n))
        return out
    }

    /// Forgets buffered samples and filter history (after a jump in the input timeline).
    public func reset() throws {
        swr_close(swr)
        try AVFailure.check(swr_init(swr), "swr_init")
    }

    /// Output samples still held inside the filter.
    public var delay: Int { Int(swr_get_delay(swr, Int64(output.rate))) }
}
