import CFFmpeg

/// The FFmpeg side of a picture whose pixels are decoded on request (`Frame.awaitsPixels`): a
/// header with size, format and timing but no buffers, copied as such, and given the decoded
/// pixels later without touching its timing.
extension Frame {
    /// A picture of `width` x `height` `format` whose pixels are `source`'s packet, still to decode.
    public static func pending(width: Int, height: Int, format: AVPixelFormat, timeBase: Rational, orientation: Orientation,
                               source: SourcePicture) -> Frame {
        let frame = Frame(timeBase: timeBase)
        frame.av.pointee.width = Int32(width)
        frame.av.pointee.height = Int32(height)
        frame.av.pointee.format = format.rawValue
        frame.av.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        frame.orientation = orientation
        frame.source = source
        return frame
    }

    /// Another header like this one (timing, tags, size), without buffers.
    func headerCopy() -> UnsafeMutablePointer<AVFrame> {
        let copy = av_frame_alloc()!
        av_frame_copy_props(copy, av)
        copy.pointee.width = av.pointee.width
        copy.pointee.height = av.pointee.height
        copy.pointee.format = av.pointee.format
        copy.pointee.nb_samples = av.pointee.nb_samples
        copy.pointee.sample_rate = av.pointee.sample_rate
        av_channel_layout_copy(&copy.pointee.ch_layout, &av.pointee.ch_layout)
        return copy
    }

    /// References to `decoded`'s pixels (with its size, format and colour tags) in this header,
    /// whose timing stays as it is: the node that emitted the frame may still read it.
    func adoptPixels(of decoded: Frame) throws {
        let d = try adoptBuffers(of: decoded)
        av.pointee.width = d.width
        av.pointee.height = d.height
        av.pointee.format = d.format
        av.pointee.color_range = d.color_range
        av.pointee.colorspace = d.colorspace
        av.pointee.color_primaries = d.color_primaries
        av.pointee.color_trc = d.color_trc
        av.pointee.chroma_location = d.chroma_location
        av.pointee.sample_aspect_ratio = d.sample_aspect_ratio
    }

    /// References to `decoded`'s buffers in this header, nothing else of it touched (its timing:
    /// the node that emitted the frame may still read it); `decoded`'s header fields returned.
    func adoptBuffers(of decoded: Frame) throws -> AVFrame {
        var taken: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        guard let t = taken else { throw MediaError("out of memory (av_frame_alloc)") }
        defer { av_frame_free(&taken) }
        try AVFailure.check(av_frame_ref(t, decoded.av), "av_frame_ref")
        let d = t.pointee
        av.pointee.buf = d.buf
        av.pointee.data = d.data
        av.pointee.linesize = d.linesize
        // The references are this header's now: freeing `taken` must leave them alone.
        t.pointee.buf = (nil, nil, nil, nil, nil, nil, nil, nil)
        av.pointee.extended_data = dataPointers
        return d
    }
}
