import CFFmpeg

extension Frame {
    /// A picture header over memory that `buffer` keeps alive: the frame takes over that
    /// reference (released with the frame, or at once if this fails) and lays its planes out
    /// from `data` as FFmpeg's image functions do at `alignment`. Nothing is copied.
    public static func picture(over buffer: UnsafeMutablePointer<AVBufferRef>, data: UnsafePointer<UInt8>,
                               width: Int, height: Int, format: AVPixelFormat, alignment: Int,
                               timeBase: Rational, orientation: Orientation = .up) throws -> Frame {
        guard let av = av_frame_alloc() else {
            var b: UnsafeMutablePointer<AVBufferRef>? = buffer
            av_buffer_unref(&b)
            throw MediaError("av_frame_alloc failed")
        }
        av.pointee.buf.0 = buffer
        av.pointee.width = Int32(width)
        av.pointee.height = Int32(height)
        av.pointee.format = format.rawValue
        av.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        let frame = Frame(owning: av, timeBase: timeBase, orientation: orientation)
        let planes = frame.dataPointers
        try AVFailure.check(av_image_fill_arrays(planes, frame.lineSizes, data, format, Int32(width), Int32(height), Int32(alignment)),
                            "av_image_fill_arrays")
        // FFmpeg's ref/clone code treats a video frame as one whose extended_data is its data array.
        av.pointee.extended_data = planes
        return frame
    }
}
