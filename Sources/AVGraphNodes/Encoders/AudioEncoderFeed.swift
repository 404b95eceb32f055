import AVGraph
import CFFmpeg

/// What every audio encoder node does around its `AudioEncoder`: input of another shape is
/// converted first (swresample to the encoder's rate, channels and layout), an audio fifo cuts it
/// into the frames the codec codes, and packet pts follow the input timeline. A gap in the input
/// becomes silence, so the stream stays continuous and in sync with the video beside it.
final class AudioEncoderFeed {
    let encoder: AudioEncoder
    private let fifo: AudioFifo
    private let pool: AudioFramePool
    private var resampler: Resampler?
    private var inputShape: AudioShape?
    /// Pts (encoder samples) of the next frame to encode; nil before the first input.
    private(set) var nextPts: Int64?
    /// Where (encoder samples) the next input frame belongs if the input is continuous.
    private var expected: Double = 0
    /// A jump the input's own stamps make up to this (20 ms) is jitter, not a gap to fill.
    private let tolerance: Double

    init(_ encoder: AudioEncoder) throws {
        self.encoder = encoder
        let shape = encoder.shape
        fifo = try AudioFifo(format: shape.format, channels: shape.channels, capacity: 4 * encoder.frameSize)
        pool = try AudioFramePool(format: shape.format, channels: shape.channels, sampleRate: shape.rate, capacity: encoder.frameSize)
        tolerance = 0.02 * Double(shape.rate)
    }

    /// Takes one input frame; returns the packets that became ready.
    func encode(_ frame: Frame, _ out: Outlet) throws -> [Packet] {
        do { try frame.loadSamples() } catch {
            // A source frame that does not decode is left out (the next one after it fills the gap with silence).
            out.warning("a source audio frame at \(frame.seconds) s to encode did not decode (\(error)); it is left out")
            return []
        }
        let frameShape = AudioShape(rate: frame.sampleRate, channels: frame.channels, format: frame.sampleFormat)
        if frameShape != inputShape {
            try drainResampler()
            inputShape = frameShape
            resampler = frameShape == encoder.shape ? nil : try Resampler(from: frameShape, to: encoder.shape)
        }
        let rate = Double(encoder.shape.rate)
        let ideal = frame.pts == avg_nopts() ? expected : Double(frame.pts) * frame.timeBase.double * rate
        if nextPts == nil {
            nextPts = Int64(ideal.rounded())
            expected = ideal
        } else if ideal - expected > tolerance {
            try drainResampler()
            try resampler?.reset()
            try writeSilence(Int((ideal - expected).rounded()))
            expected = ideal
        }
        expected += Double(frame.sampleCount) * rate / Double(frame.sampleRate)
        if let resampler {
            if let converted = try resampler.convert(frame) { try fifo.write(converted) }
        } else {
            try fifo.write(frame)
        }
        return try encodeFull()
    }

    /// A frame whose source packet is sent on instead of encoded (AAC passthrough): returns the pts
    /// it goes out at. Next to the last one while the source is continuous, so its jittery
    /// millisecond stamps do not jitter the track; after a gap, where the source puts it (a gap
    /// stays a gap: nothing is encoded to fill it).
    func pass(_ frame: Frame) -> Int64 {
        let ideal = Double(frame.pts) * frame.timeBase.double * Double(encoder.shape.rate)
        if nextPts == nil || ideal - expected > tolerance {
            nextPts = Int64(ideal.rounded())
            expected = ideal
        }
        expected += Double(frame.sampleCount)
        let pts = nextPts!
        nextPts! += Int64(frame.sampleCount)
        return pts
    }

    /// The end of the input: what the resampler and the fifo hold (a short last frame), then
    /// what the encoder holds.
    func finish() throws -> [Packet] {
        try drainResampler()
        var packets = try encodeFull()
        if fifo.count > 0 { packets += try encodeChunk(fifo.count) }
        return packets + (try encoder.encode(nil))
    }

    private func writeSilence(_ samples: Int) throws {
        guard samples > 0 else { return }
        let silence = try pool.frame(samples: samples)
        av_samples_set_silence(silence.audioPlanes, 0, Int32(samples), Int32(encoder.shape.channels), encoder.shape.format)
        try fifo.write(silence)
    }

    private func drainResampler() throws {
        guard let resampler else { return }
        while let tail = try resampler.convert(nil) { try fifo.write(tail) }
    }

    private func encodeFull() throws -> [Packet] {
        var packets: [Packet] = []
        while fifo.count >= encoder.frameSize { packets += try encodeChunk(encoder.frameSize) }
        return packets
    }

    private func encodeChunk(_ n: Int) throws -> [Packet] {
        let frame = try pool.frame(samples: n, pts: nextPts ?? 0)
        try fifo.read(into: frame)
        nextPts = frame.pts + Int64(n)
        return try encoder.encode(frame)
    }
}
