import CFFmpeg

/// What a protocol written in Swift (avgraph's RTMP client) needs of a packet and its stream
/// beyond the bytes: times in milliseconds, as FLV carries them, and the stream's shape for
/// its metadata.
extension Packet {
    /// Decode time in milliseconds (presentation time when the decode time is unknown).
    public var decodeMilliseconds: Int64 {
        let t = av.pointee.dts != avg_nopts() ? av.pointee.dts : av.pointee.pts
        return Rational.rescale(t, from: timeBase, to: Rational(1, 1000))
    }

    /// Milliseconds from decoding to presentation (B-frames: positive); 0 when either is unknown.
    public var compositionMilliseconds: Int64 {
        guard av.pointee.dts != avg_nopts(), av.pointee.pts != avg_nopts() else { return 0 }
        return Rational.rescale(av.pointee.pts, from: timeBase, to: Rational(1, 1000))
            - Rational.rescale(av.pointee.dts, from: timeBase, to: Rational(1, 1000))
    }
}

extension EncodedStream {
    /// The pictures' coded size (0 for audio).
    public var pictureSize: (width: Int, height: Int) { (Int(parameters.pointee.width), Int(parameters.pointee.height)) }

    /// Sample rate and channels (0 for video).
    public var audioShape: (sampleRate: Int, channels: Int) {
        (Int(parameters.pointee.sample_rate), Int(parameters.pointee.ch_layout.nb_channels))
    }
}
