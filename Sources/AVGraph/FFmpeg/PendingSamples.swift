import CFFmpeg

/// The FFmpeg side of an audio frame whose samples are decoded on request: a header with the
/// sample count, rate, layout and format the decoder gives, and timing, but no buffers (what an
/// encoder sending the source's packets on needs), given the decoded samples later.
extension Frame {
    /// `samples` samples shaped like `shape` (its rate, channel layout and sample format) that
    /// are `source`'s packet, still to decode.
    public static func pendingSamples(_ samples: Int, like shape: Frame, timeBase: Rational, source: SourcePicture) -> Frame {
        let frame = Frame(timeBase: timeBase)
        frame.av.pointee.nb_samples = Int32(samples)
        frame.av.pointee.sample_rate = shape.av.pointee.sample_rate
        frame.av.pointee.format = shape.av.pointee.format
        av_channel_layout_copy(&frame.av.pointee.ch_layout, &shape.av.pointee.ch_layout)
        frame.source = source
        return frame
    }

    /// An audio frame whose samples are still in its source packet, not decoded (see
    /// `SourcePicture`): count, rate, layout and timing are there; a node that uses the samples
    /// calls `loadSamples()` first.
    public var awaitsSamples: Bool { sampleCount > 0 && awaitsPixels }

    /// Decodes the samples of a frame that awaits them (nothing for any other frame), on the
    /// asking node's thread; every frame of the same packet shares the result.
    public func loadSamples() throws {
        guard awaitsSamples, let source, let decoding = source.decoding else { return }
        let decoded = try source.decodedPicture ?? decoding.decode(source)
        // The header already says what the samples are (the source checked the decoder's first
        // frames); decoded otherwise, they would not be what it promised.
        guard decoded.sampleCount == sampleCount, decoded.sampleRate == sampleRate, decoded.channels == channels,
              decoded.av.pointee.format == av.pointee.format else {
            throw MediaError("the source's audio frame decoded as \(decoded.sampleCount) samples at \(decoded.sampleRate) Hz, "
                + "\(decoded.channels) channels, not the \(sampleCount) at \(sampleRate) Hz, \(channels) announced")
        }
        _ = try adoptBuffers(of: decoded)
    }
}
