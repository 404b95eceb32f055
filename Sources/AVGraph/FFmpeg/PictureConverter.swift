import CFFmpeg

/// Converts pictures to one fixed size and pixel format with swscale, into frames drawn from a
/// buffer pool, so steady-state conversion allocates nothing.
public final class PictureConverter {
    public let width: Int32
    public let height: Int32
    public let format: AVPixelFormat
    private var sws: OpaquePointer?
    private let pool: OpaquePointer
    private let align: Int32 = 64

    public init(width: Int, height: Int, format: AVPixelFormat) throws {
        self.width = Int32(width)
        self.height = Int32(height)
        self.format = format
        let size = av_image_get_buffer_size(format, Int32(width), Int32(height), align)
        try AVFailure.check(size, "av_image_get_buffer_size")
        guard let pool = av_buffer_pool_init(Int(size), nil) else { throw MediaError("out of memory (av_buffer_pool_init)") }
        self.pool = pool
    }

    deinit {
        sws_freeContext(sws)
        var p: OpaquePointer? = pool
        av_buffer_pool_uninit(&p)
    }

    /// A new frame with `source`'s picture converted; timing and side data are copied, pixels converted once.
    public func convert(_ source: UnsafePointer<AVFrame>) throws -> UnsafeMutablePointer<AVFrame> {
        let src = source.pointee
        sws = sws_getCachedContext(sws, src.width, src.height, AVPixelFormat(src.format),
                                   width, height, format, SWS_BICUBIC, nil, nil, nil)
        guard let sws else {
            throw MediaError("cannot convert \(src.width)x\(src.height) \(PictureConverter.name(AVPixelFormat(src.format))) to \(width)x\(height) \(PictureConverter.name(format))")
        }
        // The encoder tags its output BT.709 limited range; make the pixels match the tags in this same pass.
        let srcMatrix = [AVCOL_SPC_BT470BG, AVCOL_SPC_SMPTE170M].contains(src.colorspace) ? SWS_CS_ITU601 : SWS_CS_ITU709
        let fullRange = src.color_range == AVCOL_RANGE_JPEG
            || [AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUVJ422P, AV_PIX_FMT_YUVJ444P].contains(AVPixelFormat(src.format))
        sws_setColorspaceDetails(sws, sws_getCoefficients(srcMatrix), fullRange ? 1 : 0,
                                 sws_getCoefficients(SWS_CS_ITU709), 0, 0, 1 << 16, 1 << 16)
        let out = av_frame_alloc()!
        do {
            guard let buf = av_buffer_pool_get(pool) else { throw MediaError("out of memory (av_buffer_pool_get)") }
            out.pointee.buf.0 = buf
            out.pointee.width = width
            out.pointee.height = height
            out.pointee.format = format.rawValue
            _ = try withUnsafeMutablePointer(to: &out.pointee.data) { data in
                try data.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { planes in
                    try withUnsafeMutablePointer(to: &out.pointee.linesize) { ls in
                        try ls.withMemoryRebound(to: Int32.self, capacity: 8) { lines in
                            try AVFailure.check(av_image_fill_arrays(planes, lines, buf.pointee.data, format, width, height, align), "av_image_fill_arrays")
                        }
                    }
                }
            }
            try AVFailure.check(av_frame_copy_props(out, source), "av_frame_copy_props")
            let scaled = withUnsafePointer(to: src.data) { srcData in
                srcData.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) { srcPlanes in
                    withUnsafePointer(to: src.linesize) { srcLs in
                        srcLs.withMemoryRebound(to: Int32.self, capacity: 8) { srcLines in
                            withUnsafePointer(to: out.pointee.data) { dstData in
                                dstData.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { dstPlanes in
                                    withUnsafePointer(to: out.pointee.linesize) { dstLs in
                                        dstLs.withMemoryRebound(to: Int32.self, capacity: 8) { dstLines in
                                            sws_scale(sws, srcPlanes, srcLines, 0, src.height, dstPlanes, dstLines)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            try AVFailure.check(scaled, "sws_scale")
            return out
        } catch {
            var f: UnsafeMutablePointer<AVFrame>? = out
            av_frame_free(&f)
            throw error
        }
    }

    public static func name(_ f: AVPixelFormat) -> String {
        av_get_pix_fmt_name(f).map { String(cString: $0) } ?? "unknown"
    }
}
