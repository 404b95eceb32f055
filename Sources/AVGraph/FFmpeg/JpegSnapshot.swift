import CFFmpeg

/// One picture as a JPEG, scaled down for a preview (libavcodec's mjpeg encoder). Made on the
/// caller's thread, from a reference to the picture: the graph never waits for it.
public enum JpegSnapshot {
    public static func encode(_ picture: Frame, maxWidth: Int = 640, quality: Int = 5) throws -> [UInt8] {
        let sw = picture.width, sh = picture.height
        guard sw > 0, sh > 0 else { throw MediaError("no picture to preview") }
        let scale = min(1, Double(maxWidth) / Double(sw))
        let tw = max(2, Int((Double(sw) * scale / 2).rounded()) * 2), th = max(2, Int((Double(sh) * scale / 2).rounded()) * 2)
        let small = Frame(timeBase: Rational(1, 1))
        small.av.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        small.av.pointee.width = Int32(tw)
        small.av.pointee.height = Int32(th)
        try AVFailure.check(av_frame_get_buffer(small.av, 0), "av_frame_get_buffer")
        let colour = Scaler.colorDetails(of: picture)
        let scaler = try Scaler(from: sw, sh, AVPixelFormat(picture.av.pointee.format), to: tw, th, AV_PIX_FMT_YUV420P,
                                quality: .bilinear, sourceFullRange: colour.fullRange, sourceMatrix: colour.matrix, threads: 1,
                                targetFullRange: true)
        let (sd, ss, td, ts) = (picture.av.pointee.data, picture.av.pointee.linesize, small.av.pointee.data, small.av.pointee.linesize)
        try scaler.scale(source: [sd.0, sd.1, sd.2, sd.3].map { $0.map { UnsafePointer($0) } }, sourceStrides: [ss.0, ss.1, ss.2, ss.3],
                         target: [td.0, td.1, td.2, td.3], targetStrides: [ts.0, ts.1, ts.2, ts.3])
        let encoder = try VideoEncoder(codecName: "mjpeg")
        let c = encoder.context
        c.pointee.width = Int32(tw)
        c.pointee.height = Int32(th)
        // Full-range 4:2:0 is what JPEG means; the J formats say the same but are deprecated.
        c.pointee.pix_fmt = AV_PIX_FMT_YUV420P
        c.pointee.color_range = AVCOL_RANGE_JPEG
        c.pointee.time_base = AVRational(num: 1, den: 1)
        c.pointee.flags |= AV_CODEC_FLAG_QSCALE
        c.pointee.global_quality = Int32(quality) * FF_QP2LAMBDA
        try encoder.open(options: [:])
        small.av.pointee.quality = c.pointee.global_quality
        small.av.pointee.color_range = AVCOL_RANGE_JPEG
        small.pts = 0
        try encoder.send(small.av)
        try encoder.send(nil)
        guard let packet = try encoder.receive() else { throw MediaError("the mjpeg encoder gave no picture") }
        defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
        return Array(UnsafeBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size)))
    }
}
