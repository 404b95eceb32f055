import CFFmpeg
import Foundation

/// How a pixel format lays its planes out, read from FFmpeg's pixel format descriptor:
/// enough to address, fill and turn pictures of 8-bit (and 16-bit) planar or semi-planar formats.
public struct PixelLayout: Sendable {
    public struct Plane: Sendable {
        /// Bytes of one element (a Y sample, an interleaved UV pair, an RGBA pixel).
        public var bytesPerElement: Int
        public var shiftX: Int
        public var shiftY: Int
    }

    public let format: AVPixelFormat
    public let name: String
    public let planes: [Plane]
    public let isRGB: Bool
    public let bitDepth: Int
    /// (plane, byte offset in the element) of each component: Y U V A, or R G B A.
    public let components: [(plane: Int, offset: Int)]

    public static func format(named name: String) -> AVPixelFormat? {
        let f = av_get_pix_fmt(name)
        return f == AV_PIX_FMT_NONE ? nil : f
    }

    public init?(_ name: String) {
        guard let f = Self.format(named: name) else { return nil }
        self.init(f)
    }

    public init?(_ format: AVPixelFormat) {
        guard let desc = av_pix_fmt_desc_get(format) else { return nil }
        let flags = desc.pointee.flags
        let unsupported = UInt64(AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BAYER)
        guard flags & unsupported == 0 else { return nil }
        self.format = format
        name = String(cString: desc.pointee.name)
        let rgb = flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0
        isRGB = rgb
        let count = Int(desc.pointee.nb_components)
        var comps: [(Int, Int)] = []
        var found: [Int: Plane] = [:]
        var depth = 8
        withUnsafePointer(to: desc.pointee.comp) { tuple in
            tuple.withMemoryRebound(to: AVComponentDescriptor.self, capacity: 4) { c in
                for i in 0..<count {
                    let chroma = !rgb && (i == 1 || i == 2)
                    let p = Int(c[i].plane)
                    comps.append((p, Int(c[i].offset)))
                    depth = Int(c[i].depth)
                    found[p] = Plane(bytesPerElement: Int(c[i].step),
                                      shiftX: chroma ? Int(desc.pointee.log2_chroma_w) : 0,
                                      shiftY: chroma ? Int(desc.pointee.log2_chroma_h) : 0)
                }
            }
        }
        guard let maxPlane = found.keys.max(), (0...maxPlane).allSatisfy({ found[$0] != nil }) else { return nil }
        planes = (0...maxPlane).map { found[$0]! }
        components = comps
        bitDepth = depth
    }

    /// Chroma subsampled alike in both directions: a quarter turn keeps it valid.
    public var canTurn: Bool { planes.allSatisfy { $0.shiftX == $0.shiftY && [1, 2, 4].contains($0.bytesPerElement) } }
    public var isEightBit: Bool { bitDepth == 8 }
    /// Width and height must be multiples of this to place regions on whole chroma samples.
    public var alignment: Int { 1 << (planes.map { max($0.shiftX, $0.shiftY) }.max() ?? 0) }

    public func planeWidth(_ p: Int, _ width: Int) -> Int { -((-width) >> planes[p].shiftX) }
    public func planeHeight(_ p: Int, _ height: Int) -> Int { -((-height) >> planes[p].shiftY) }

    /// Byte offset of picture point (x, y) in plane `p`.
    public func offset(plane p: Int, x: Int, y: Int, lineSize: Int) -> Int {
        (y >> planes[p].shiftY) * lineSize + (x >> planes[p].shiftX) * planes[p].bytesPerElement
    }

    /// One element per plane holding a color (8-bit formats): Y, U, V (or R, G, B) and opaque alpha.
    public func elements(_ c0: UInt8, _ c1: UInt8, _ c2: UInt8) -> [[UInt8]] {
        var out = planes.map { [UInt8](repeating: 0, count: $0.bytesPerElement) }
        let values = [c0, c1, c2, 255]
        for (i, c) in components.enumerated() where c.offset < out[c.plane].count {
            out[c.plane][c.offset] = values[i]
        }
        return out
    }

    /// The BT.709 limited-range elements for an RGB color, in this format.
    public func elements(for color: RGB) -> [[UInt8]] {
        if isRGB { return elements(color.r, color.g, color.b) }
        let yuv = color.yuv709
        return elements(yuv.y, yuv.u, yuv.v)
    }
}

/// A rectangle in picture (luma) coordinates.
public struct PixelRect: Sendable, Equatable {
    public var x: Int, y: Int, width: Int, height: Int
    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x; self.y = y; self.width = width; self.height = height
    }
    public var isEmpty: Bool { width <= 0 || height <= 0 }
    public func clipped(to w: Int, _ h: Int) -> PixelRect {
        let x0 = max(x, 0), y0 = max(y, 0), x1 = min(x + width, w), y1 = min(y + height, h)
        return PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }
}

extension Frame {
    /// Fills `rect` (clipped to the picture) with one color given as per-plane elements.
    /// Chroma covers every sample the rectangle touches.
    public func fill(_ rect: PixelRect, with elements: [[UInt8]], layout: PixelLayout) {
        let r = rect.clipped(to: width, height)
        guard !r.isEmpty else { return }
        for (p, plane) in layout.planes.enumerated() {
            guard let base = self.plane(p) else { continue }
            let ls = lineSize(p)
            let x0 = r.x >> plane.shiftX, x1 = -((-(r.x + r.width)) >> plane.shiftX)
            let y0 = r.y >> plane.shiftY, y1 = -((-(r.y + r.height)) >> plane.shiftY)
            let count = x1 - x0
            let e = elements[p]
            for y in y0..<y1 {
                let row = UnsafeMutableRawPointer(base + y * ls + x0 * plane.bytesPerElement)
                PixelRect.fillRow(row, element: e, count: count)
            }
        }
    }
}

extension Frame {
    /// Fills the whole picture except `inner` (bars around a scaled picture). Paint them after
    /// scaling: swscale's SIMD may write a few pixels past the right edge of its target.
    public func fill(around inner: PixelRect, with elements: [[UInt8]], layout: PixelLayout) {
        let w = width, h = height, r = inner
        guard r != PixelRect(x: 0, y: 0, width: w, height: h) else { return }
        fill(PixelRect(x: 0, y: 0, width: w, height: r.y), with: elements, layout: layout)
        fill(PixelRect(x: 0, y: r.y + r.height, width: w, height: h - r.y - r.height), with: elements, layout: layout)
        fill(PixelRect(x: 0, y: r.y, width: r.x, height: r.height), with: elements, layout: layout)
        fill(PixelRect(x: r.x + r.width, y: r.y, width: w - r.x - r.width, height: r.height), with: elements, layout: layout)
    }
}

extension PixelRect {
    @inline(__always)
    static func fillRow(_ row: UnsafeMutableRawPointer, element e: [UInt8], count: Int) {
        switch e.count {
        case 1:
            memset(row, Int32(e[0]), count)
        case 2:
            if e[0] == e[1] { memset(row, Int32(e[0]), count * 2); return }
            let v = UInt16(e[0]) | UInt16(e[1]) << 8
            row.initializeMemory(as: UInt16.self, repeating: UInt16(littleEndian: v), count: count)
        case 4:
            let v = UInt32(e[0]) | UInt32(e[1]) << 8 | UInt32(e[2]) << 16 | UInt32(e[3]) << 24
            row.initializeMemory(as: UInt32.self, repeating: UInt32(littleEndian: v), count: count)
        default:
            for i in 0..<count { for (j, b) in e.enumerated() { row.storeBytes(of: b, toByteOffset: i * e.count + j, as: UInt8.self) } }
        }
    }
}
