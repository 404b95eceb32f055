import CFFmpeg

/// Decodes the first picture of an image file (PNG, JPEG, ...) with libavformat/libavcodec.
public enum ImageLoader {
    public static func load(_ path: String) throws -> Frame {
        var format: UnsafeMutablePointer<AVFormatContext>?
        try AVFailure.check(avformat_open_input(&format, path, nil, nil), "open '\(path)'")
        defer { avformat_close_input(&format) }
        guard let fmt = format else { throw MediaError("cannot open '\(path)'") }
        try AVFailure.check(avformat_find_stream_info(fmt, nil), "read '\(path)'")
        let index = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        try AVFailure.check(index, "find a picture in '\(path)'")
        guard let par = fmt.pointee.streams[Int(index)]?.pointee.codecpar,
              let codec = avcodec_find_decoder(par.pointee.codec_id) else {
            throw MediaError("no decoder for the picture in '\(path)'")
        }
        var ctx = avcodec_alloc_context3(codec)
        defer { avcodec_free_context(&ctx) }
        try AVFailure.check(avcodec_parameters_to_context(ctx, par), "avcodec_parameters_to_context")
        try AVFailure.check(avcodec_open2(ctx, codec, nil), "open decoder for '\(path)'")
        var packet = av_packet_alloc()
        defer { av_packet_free(&packet) }
        let frame = Frame(timeBase: Rational(1, 1))
        while av_read_frame(fmt, packet) >= 0 {
            defer { av_packet_unref(packet) }
            guard packet!.pointee.stream_index == index else { continue }
            try AVFailure.check(avcodec_send_packet(ctx, packet), "decode '\(path)'")
            if avcodec_receive_frame(ctx, frame.av) >= 0 { return frame }
        }
        avcodec_send_packet(ctx, nil)
        try AVFailure.check(avcodec_receive_frame(ctx, frame.av), "decode '\(path)'")
        return frame
    }
}
