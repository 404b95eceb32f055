import AVGraph
import CFFmpeg

/// The watermark prepared for one picture size: BT.709 limited-range Y, Cb, Cr and alpha per
/// pixel of the mark, ready to be blended in.
struct WatermarkMark {
    enum Source { case image(Frame), text(String) }

    let forWidth: Int, forHeight: Int
    let width: Int, height: Int
    var luma: [UInt8], cb: [UInt8], cr: [UInt8], alpha: [Float]

    init(_ source: Source, pictureWidth pw: Int, pictureHeight ph: Int, scale: Double) throws {
        forWidth = pw
        forHeight = ph
        var rgba: [UInt8]
        var w: Int, h: Int
        switch source {
        case .image(let image):
            w = max(2, min(pw, Int(Double(pw) * scale)) & ~1)
            h = max(2, min(ph, Int((Double(w) * Double(image.height) / Double(max(image.width, 1))).rounded())) & ~1)
            let out = Frame(timeBase: Rational(1, 1))
            out.av.pointee.width = Int32(w)
            out.av.pointee.height = Int32(h)
            out.av.pointee.format = AV_PIX_FMT_RGBA.rawValue
            try AVFailure.check(av_frame_get_buffer(out.av, 32), "av_frame_get_buffer")
            let color = Scaler.colorDetails(of: image)
            let scaler = try Scaler(from: image.width, image.height, image.pixelFormat, to: w, h, AV_PIX_FMT_RGBA,
                                    quality: .bicubic, sourceFullRange: color.fullRange, sourceMatrix: color.matrix)
            try scaler.scale(image, PixelRect(x: 0, y: 0, width: image.width, height: image.height),
                             into: out, PixelRect(x: 0, y: 0, width: w, height: h))
            rgba = [UInt8](repeating: 0, count: w * h * 4)
            let p = out.plane(0)!, ls = out.lineSize(0)
            for y in 0..<h { for x in 0..<(w * 4) { rgba[y * w * 4 + x] = p[y * ls + x] } }
            // A picture without alpha decodes to RGBA with alpha 255: drawn as an opaque box.
        case .text(let text):
            // Glyphs of 5x7 dots in cells of 6x8, on a half-transparent dark box one dot wider all round.
            let dot = max(1, Int((Double(ph) * scale / 45).rounded()))
            let chars = Array(text.uppercased())
            let cols = chars.count * 6 + 1, rows = 9
            w = min(pw, cols * dot) & ~1
            h = min(ph, rows * dot) & ~1
            rgba = [UInt8](repeating: 0, count: w * h * 4)
            for y in 0..<h {
                for x in 0..<w {
                    let cx = x / dot, cy = y / dot
                    var on = false
                    let gx = (cx - 1) % 6, gi = (cx - 1) / 6, gy = cy - 1
                    if cx >= 1, gi < chars.count, gx < 5, (0..<7).contains(gy) {
                        on = (Glyphs.rows(chars[gi])[gy] >> (4 - gx)) & 1 == 1
                    }
                    let i = (y * w + x) * 4
                    if on { rgba[i] = 255; rgba[i + 1] = 255; rgba[i + 2] = 255; rgba[i + 3] = 255 } else { rgba[i + 3] = 128 }
                }
            }
        }
        width = w
        height = h
        luma = [UInt8](repeating: 16, count: w * h)
        cb = [UInt8](repeating: 128, count: w * h)
        cr = [UInt8](repeating: 128, count: w * h)
        alpha = [Float](repeating: 0, count: w * h)
        for i in 0..<(w * h) {
            let r = Double(rgba[i * 4]) / 255, g = Double(rgba[i * 4 + 1]) / 255, b = Double(rgba[i * 4 + 2]) / 255
            let y = 0.2126 * r + 0.7152 * g + 0.0722 * b
            luma[i] = UInt8((16 + 219 * y).rounded())
            cb[i] = UInt8(max(16, min(240, (128 + 224 * (b - y) / 1.8556).rounded())))
            cr[i] = UInt8(max(16, min(240, (128 + 224 * (r - y) / 1.5748).rounded())))
            alpha[i] = Float(rgba[i * 4 + 3]) / 255
        }
    }

    /// Where the mark's top-left pixel goes (even, so 4:2:0 chroma lines up).
    func origin(corner: String, margin: Int, in frame: Frame) -> (x: Int, y: Int) {
        let right = corner.hasSuffix("right"), bottom = corner.hasPrefix("bottom")
        let x = right ? frame.width - width - margin : margin
        let y = bottom ? frame.height - height - margin : margin
        return (max(0, x) & ~1, max(0, y) & ~1)
    }

    /// Blends the mark into a yuv420p or nv12 frame (which must be writable).
    func draw(into frame: Frame, corner: String, margin: Int, opacity: Double) {
        let (x0, y0) = origin(corner: corner, margin: margin, in: frame)
        let w = min(width, frame.width - x0), h = min(height, frame.height - y0)
        guard w > 0, h > 0, let yPlane = frame.plane(0) else { return }
        let o = Float(opacity)
        let ls = frame.lineSize(0)
        luma.withUnsafeBufferPointer { m in
            alpha.withUnsafeBufferPointer { a in
                for y in 0..<h {
                    let row = yPlane + (y0 + y) * ls + x0
                    for x in 0..<w {
                        let k = a[y * width + x] * o
                        if k <= 0 { continue }
                        row[x] = UInt8(Float(row[x]) + (Float(m[y * width + x]) - Float(row[x])) * k + 0.5)
                    }
                }
            }
        }
        let nv12 = frame.pixelFormat == AV_PIX_FMT_NV12
        for cy in 0..<(h / 2) {
            for cx in 0..<(w / 2) {
                let i = (cy * 2) * width + cx * 2
                let k = alpha[i] * o
                if k <= 0 { continue }
                if nv12, let uv = frame.plane(1) {
                    let p = uv + (y0 / 2 + cy) * frame.lineSize(1) + x0 + cx * 2
                    p[0] = UInt8(Float(p[0]) + (Float(cb[i]) - Float(p[0])) * k + 0.5)
                    p[1] = UInt8(Float(p[1]) + (Float(cr[i]) - Float(p[1])) * k + 0.5)
                } else if let u = frame.plane(1), let v = frame.plane(2) {
                    let pu = u + (y0 / 2 + cy) * frame.lineSize(1) + x0 / 2 + cx
                    let pv = v + (y0 / 2 + cy) * frame.lineSize(2) + x0 / 2 + cx
                    pu.pointee = UInt8(Float(pu.pointee) + (Float(cb[i]) - Float(pu.pointee)) * k + 0.5)
                    pv.pointee = UInt8(Float(pv.pointee) + (Float(cr[i]) - Float(pv.pointee)) * k + 0.5)
                }
            }
        }
    }
}
