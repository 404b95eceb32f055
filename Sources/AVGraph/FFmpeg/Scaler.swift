import CFFmpeg
import Foundation

/// One swscale context: a fixed source geometry and format to a fixed target geometry and
/// format, with the range/matrix conversion done in the same pass (BT.709 limited out).
public final class Scaler {
    public enum Quality: String, CaseIterable, Sendable {
        case fast, bilinear, bicubic, lanczos
        var flags: Int32 {
            switch self {
            case .fast: return SWS_FAST_BILINEAR
            case .bilinear: return SWS_BILINEAR
            case .bicubic: return SWS_BICUBIC
            case .lanczos: return SWS_LANCZOS
            }
        }
    }

    private let context: OpaquePointer
    public let sourceWidth: Int, sourceHeight: Int
    public let targetWidth: Int, targetHeight: Int
    /// Slice threads swscale runs this conversion on (1: the calling thread only).
    public let threads: Int

    /// Sources of at least this many pixels are scaled on several threads (a phone screen is
    /// ~3 Mpixel; a 720p card or a small picture is not worth waking threads for).
    public static let threadedPixels = 1_500_000

    /// Slice threads for a conversion reading `pixels` source pixels: one per core for big sources.
    public static func threads(forSourcePixels pixels: Int) -> Int {
        pixels >= threadedPixels ? min(4, max(1, ProcessInfo.processInfo.activeProcessorCount)) : 1
    }

    /// `sourceFullRange`/`sourceMatrix` describe YUV input (ignored for RGB input).
    /// `threads` nil: fitted to the source size (`threads(forSourcePixels:)`).
    public init(from sw: Int, _ sh: Int, _ sourceFormat: AVPixelFormat, to tw: Int, _ th: Int, _ targetFormat: AVPixelFormat,
                quality: Quality = .bicubic, sourceFullRange: Bool = false, sourceMatrix: Int32 = SWS_CS_ITU709,
                threads: Int? = nil, targetFullRange: Bool = false) throws {
        let n = threads ?? Self.threads(forSourcePixels: sw * sh)
        let failure = MediaError("swscale cannot convert \(sw)x\(sh) \(Self.name(sourceFormat)) to \(tw)x\(th) \(Self.name(targetFormat))")
        if n > 1 {
            // FFmpeg 5's slice threads: the "threads" option must be set before sws_init_context;
            // they are used by sws_scale_frame (the legacy sws_scale runs on one thread).
            guard let c = sws_alloc_context() else { throw failure }
            let raw = UnsafeMutableRawPointer(c)
            var ok = av_opt_set_int(raw, "srcw", Int64(sw), 0) >= 0
            ok = ok && av_opt_set_int(raw, "srch", Int64(sh), 0) >= 0
            ok = ok && av_opt_set_int(raw, "src_format", Int64(sourceFormat.rawValue), 0) >= 0
            ok = ok && av_opt_set_int(raw, "dstw", Int64(tw), 0) >= 0
            ok = ok && av_opt_set_int(raw, "dsth", Int64(th), 0) >= 0
            ok = ok && av_opt_set_int(raw, "dst_format", Int64(targetFormat.rawValue), 0) >= 0
            ok = ok && av_opt_set_int(raw, "sws_flags", Int64(quality.flags), 0) >= 0
            ok = ok && av_opt_set_int(raw, "threads", Int64(n), 0) >= 0
            if !ok || sws_init_context(c, nil, nil) < 0 {
                sws_freeContext(c)
                throw failure
            }
            context = c
        } else {
            guard let c = sws_getContext(Int32(sw), Int32(sh), sourceFormat, Int32(tw), Int32(th), targetFormat,
                                         quality.flags, nil, nil, nil) else { throw failure }
            context = c
        }
        self.threads = n
        let c = context
        sourceWidth = sw; sourceHeight = sh; targetWidth = tw; targetHeight = th
        // Range and matrix change inside the one scaling pass: limited-range BT.709 out (full range
        // for a JPEG), whatever came in.
        let code = sws_setColorspaceDetails(c, sws_getCoefficients(sourceMatrix), sourceFullRange ? 1 : 0,
                                            sws_getCoefficients(SWS_CS_ITU709), targetFullRange ? 1 : 0, 0, 1 << 16, 1 << 16)
        if code < 0 && !(PixelLayout(sourceFormat)?.isRGB ?? false) {
            throw MediaError("swscale cannot set BT.709 limited range for \(Self.name(sourceFormat)) -> \(Self.name(targetFormat))")
        }
    }

    deinit { sws_freeContext(context) }

    static func name(_ f: AVPixelFormat) -> String { av_get_pix_fmt_name(f).map { String(cString: $0) } ?? "?" }

    /// Scales the source region whose planes start at `source` into the target region at `target`.
    public func scale(source: [UnsafePointer<UInt8>?], sourceStrides: [Int32],
                      target: [UnsafeMutablePointer<UInt8>?], targetStrides: [Int32]) throws {
        let src = source + Array(repeating: nil, count: max(0, 4 - source.count))
        let dst = target + Array(repeating: nil, count: max(0, 4 - target.count))
        let ss = sourceStrides + Array(repeating: 0, count: max(0, 4 - sourceStrides.count))
        let ds = targetStrides + Array(repeating: 0, count: max(0, 4 - targetStrides.count))
        let lines = sws_scale(context, src, ss, 0, Int32(sourceHeight), dst, ds)
        try AVFailure.check(lines, "sws_scale")
    }

    /// Scales `rect` of `source` into `rect` of `target` (both rects on whole chroma samples).
    public func scale(_ source: Frame, _ sourceRect: PixelRect, into target: Frame, _ targetRect: PixelRect) throws {
        guard let sl = PixelLayout(source.pixelFormat), let tl = PixelLayout(target.pixelFormat) else {
            throw MediaError("unsupported pixel format for scaling")
        }
        let src: [UnsafePointer<UInt8>?] = sl.planes.indices.map { p in
            source.plane(p).map { UnsafePointer($0 + sl.offset(plane: p, x: sourceRect.x, y: sourceRect.y, lineSize: source.lineSize(p))) }
        }
        let dst: [UnsafeMutablePointer<UInt8>?] = tl.planes.indices.map { p in
            target.plane(p).map { $0 + tl.offset(plane: p, x: targetRect.x, y: targetRect.y, lineSize: target.lineSize(p)) }
        }
        if threads > 1, source.av.pointee.buf.0 != nil, target.av.pointee.buf.0 != nil {
            // sws_scale_frame takes references to its frames: views over the rects that share the buffers.
            let s = Self.view(source, src.map { $0.map { UnsafeMutablePointer(mutating: $0) } }, sourceRect)
            let d = Self.view(target, dst, targetRect)
            defer { var a: UnsafeMutablePointer<AVFrame>? = s; av_frame_free(&a); var b: UnsafeMutablePointer<AVFrame>? = d; av_frame_free(&b) }
            try AVFailure.check(sws_scale_frame(context, d, s), "sws_scale_frame")
            return
        }
        try scale(source: src, sourceStrides: sl.planes.indices.map { Int32(source.lineSize($0)) },
                  target: dst, targetStrides: tl.planes.indices.map { Int32(target.lineSize($0)) })
    }

    /// A frame header over `rect` of `frame` (plane pointers already offset) holding new
    /// references to its buffers, so swscale's internal av_frame_ref shares rather than copies.
    private static func view(_ frame: Frame, _ planes: [UnsafeMutablePointer<UInt8>?], _ rect: PixelRect) -> UnsafeMutablePointer<AVFrame> {
        let v = av_frame_alloc()!
        v.pointee.width = Int32(rect.width)
        v.pointee.height = Int32(rect.height)
        v.pointee.format = frame.av.pointee.format
        v.pointee.color_range = frame.av.pointee.color_range
        v.pointee.colorspace = frame.av.pointee.colorspace
        let base = UnsafeMutableRawPointer(v)
        let bufs = (base + MemoryLayout<AVFrame>.offset(of: \AVFrame.buf)!).assumingMemoryBound(to: UnsafeMutablePointer<AVBufferRef>?.self)
        let from = frame.av.pointee.buf
        withUnsafeBytes(of: from) { raw in
            let f = raw.bindMemory(to: UnsafeMutablePointer<AVBufferRef>?.self)
            for i in 0..<f.count { bufs[i] = f[i].flatMap { av_buffer_ref($0) } }
        }
        let data = (base + MemoryLayout<AVFrame>.offset(of: \AVFrame.data)!).assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
        let lines = (base + MemoryLayout<AVFrame>.offset(of: \AVFrame.linesize)!).assumingMemoryBound(to: Int32.self)
        for (p, ptr) in planes.enumerated() where p < 4 {
            data[p] = ptr
            lines[p] = Int32(frame.lineSize(p))
        }
        v.pointee.extended_data = data
        return v
    }

    /// Matrix and range of a frame as swscale wants them.
    public static func colorDetails(of frame: Frame) -> (fullRange: Bool, matrix: Int32) {
        let full = frame.av.pointee.color_range == AVCOL_RANGE_JPEG
        let matrix: Int32
        switch frame.av.pointee.colorspace {
        case AVCOL_SPC_BT470BG, AVCOL_SPC_SMPTE170M: matrix = SWS_CS_ITU601
        case AVCOL_SPC_BT2020_NCL, AVCOL_SPC_BT2020_CL: matrix = SWS_CS_BT2020
        case AVCOL_SPC_FCC: matrix = SWS_CS_FCC
        case AVCOL_SPC_SMPTE240M: matrix = SWS_CS_SMPTE240M
        default: matrix = SWS_CS_ITU709
        }
        return (full, matrix)
    }
}

/// Where a picture goes when it is scaled into another size.
public enum Placement {
    public enum Mode: String, Sendable, CaseIterable { case fit, fill, stretch }

    /// Which part of the input goes to which part of the output, on whole chroma samples.
    public static func place(inWidth iw: Int, inHeight ih: Int, inAlign: Int, outWidth W: Int, outHeight H: Int, outAlign: Int,
                          mode: Mode) -> (source: PixelRect, target: PixelRect) {
        func snap(_ v: Double, limit: Int, align: Int) -> Int {
            let n = Int(v.rounded())
            if n >= limit { return limit }
            return max(align, n / align * align)
        }
        let full = PixelRect(x: 0, y: 0, width: iw, height: ih)
        let canvas = PixelRect(x: 0, y: 0, width: W, height: H)
        switch mode {
        case .stretch:
            return (full, canvas)
        case .fit:
            let scale = min(Double(W) / Double(iw), Double(H) / Double(ih))
            let w = snap(Double(iw) * scale, limit: W, align: outAlign), h = snap(Double(ih) * scale, limit: H, align: outAlign)
            let x = (W - w) / 2 / outAlign * outAlign, y = (H - h) / 2 / outAlign * outAlign
            return (full, PixelRect(x: x, y: y, width: w, height: h))
        case .fill:
            let scale = max(Double(W) / Double(iw), Double(H) / Double(ih))
            let w = snap(Double(W) / scale, limit: iw, align: inAlign), h = snap(Double(H) / scale, limit: ih, align: inAlign)
            let x = (iw - w) / 2 / inAlign * inAlign, y = (ih - h) / 2 / inAlign * inAlign
            return (PixelRect(x: x, y: y, width: w, height: h), canvas)
        }
    }
}
