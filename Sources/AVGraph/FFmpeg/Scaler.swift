import CFFmpeg

/// One swscale context: a fixed source geometry and format to a fixed target geometry and
/// format, with the range/matrix conversion done in the same pass (BT.709 limited out).
public final class Scaler: @unchecked Sendable {
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

    /// `sourceFullRange`/`sourceMatrix` describe YUV input (ignored for RGB input).
    public init(from sw: Int, _ sh: Int, _ sourceFormat: AVPixelFormat, to tw: Int, _ th: Int, _ targetFormat: AVPixelFormat,
                quality: Quality = .bicubic, sourceFullRange: Bool = false, sourceMatrix: Int32 = SWS_CS_ITU709) throws {
        guard let c = sws_getContext(Int32(sw), Int32(sh), sourceFormat, Int32(tw), Int32(th), targetFormat,
                                     quality.flags, nil, nil, nil) else {
            throw MediaError("swscale cannot convert \(sw)x\(sh) \(Self.name(sourceFormat)) to \(tw)x\(th) \(Self.name(targetFormat))")
        }
        context = c
        sourceWidth = sw; sourceHeight = sh; targetWidth = tw; targetHeight = th
        // Range and matrix change inside the one scaling pass: limited-range BT.709 out, whatever came in.
        let code = sws_setColorspaceDetails(c, sws_getCoefficients(sourceMatrix), sourceFullRange ? 1 : 0,
                                            sws_getCoefficients(SWS_CS_ITU709), 0, 0, 1 << 16, 1 << 16)
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
        try scale(source: src, sourceStrides: sl.planes.indices.map { Int32(source.lineSize($0)) },
                  target: dst, targetStrides: tl.planes.indices.map { Int32(target.lineSize($0)) })
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
    public enum Mode: String, Sendable { case fit, fill, stretch }

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
