import CFFmpeg
internal import CKernels
import Foundation

/// The one definition of what an orientation tag means for pixels, shared by everything that
/// writes a turned picture (`testsrc`, `rawvideo` tags) and everything that stands it upright (`orient`).
///
/// A tag says where the stored buffer's first row and column appear when it is shown upright
/// (EXIF / CGImagePropertyOrientation, as ReplayKit tags screen buffers): `right` (EXIF 6) has
/// the stored top row on the visual right and is shown by turning it 90° clockwise; `left`
/// (EXIF 8) has it on the visual left and is turned 90° counter-clockwise; `down` a half turn;
/// `up-mirrored` a left-right flip, `down-mirrored` a top-bottom flip, `left-mirrored` (EXIF 5)
/// a transpose, `right-mirrored` (EXIF 7) a transverse.
public struct StorageMap: Sendable, Equatable {
    /// Upright x runs along the buffer's y axis (a quarter turn).
    public var swapsAxes: Bool
    /// The buffer coordinate that upright x (or y, when swapped) maps to runs backwards.
    public var flipX: Bool
    public var flipY: Bool

    /// Where upright pixel (x, y) is stored in a buffer of `bufferWidth` x `bufferHeight`.
    @inline(__always)
    public func bufferPoint(x: Int, y: Int, bufferWidth bw: Int, bufferHeight bh: Int) -> (x: Int, y: Int) {
        let sx = swapsAxes ? y : x, sy = swapsAxes ? x : y
        return (flipX ? bw - 1 - sx : sx, flipY ? bh - 1 - sy : sy)
    }

    /// The buffer rectangle holding upright rectangle `r`.
    public func bufferRect(_ r: PixelRect, bufferWidth bw: Int, bufferHeight bh: Int) -> PixelRect {
        let a = bufferPoint(x: r.x, y: r.y, bufferWidth: bw, bufferHeight: bh)
        let b = bufferPoint(x: r.x + r.width - 1, y: r.y + r.height - 1, bufferWidth: bw, bufferHeight: bh)
        return PixelRect(x: min(a.x, b.x), y: min(a.y, b.y), width: abs(a.x - b.x) + 1, height: abs(a.y - b.y) + 1)
    }
}

extension Orientation {
    public var storage: StorageMap {
        switch self {
        case .up: return StorageMap(swapsAxes: false, flipX: false, flipY: false)
        case .down: return StorageMap(swapsAxes: false, flipX: true, flipY: true)
        case .upMirrored: return StorageMap(swapsAxes: false, flipX: true, flipY: false)
        case .downMirrored: return StorageMap(swapsAxes: false, flipX: false, flipY: true)
        // EXIF 8: stored row r is upright column r; stored column c is upright row (height - 1 - c).
        case .left: return StorageMap(swapsAxes: true, flipX: true, flipY: false)
        // EXIF 6: stored row r is upright column (width - 1 - r); stored column c is upright row c.
        case .right: return StorageMap(swapsAxes: true, flipX: false, flipY: true)
        case .leftMirrored: return StorageMap(swapsAxes: true, flipX: false, flipY: false)
        case .rightMirrored: return StorageMap(swapsAxes: true, flipX: true, flipY: true)
        }
    }

    /// Upright size of a buffer of `width` x `height` carrying this tag.
    public func uprightSize(width: Int, height: Int) -> (width: Int, height: Int) {
        swapsAxes ? (height, width) : (width, height)
    }
}

extension Array where Element == OrientationChange {
    /// The orientation in force at media time `t` (schedules are sorted; `up` before the first entry).
    public func orientation(at t: Double) -> Orientation {
    var current = Orientation.up
    for c in self {
        if c.at <= t + 1e-9 { current = c.value } else { break }
    }
    return current
    }
}

public enum PictureTurn {
    /// Quarter turns of at least this many upright pixels are split into bands of rows, one per core.
    public static let bandedPixels = 100_000

    /// Bands a quarter turn of `pixels` upright pixels is split into by default.
    public static func bands(forPixels pixels: Int) -> Int {
        pixels >= bandedPixels ? min(4, max(1, ProcessInfo.processInfo.activeProcessorCount)) : 1
    }

    /// Writes the upright picture of `source` (tagged by `map`) into `target`, whose size must be
    /// the upright size. Quarter turns go in square tiles so both pictures are walked cache-friendly,
    /// and big ones in horizontal bands of the upright picture on several threads (`bands` nil:
    /// fitted to the size); each band reads its own strip of buffer columns, so bands share nothing.
    public static func upright(_ source: Frame, into target: Frame, map: StorageMap, layout: PixelLayout, bands: Int? = nil) {
        let n = map.swapsAxes ? (bands ?? Self.bands(forPixels: target.width * target.height)) : 1
        // Band edges on whole 16-row steps: whole 8x8 kernel blocks in every plane of 4:2:0.
        let step = 16
        let rows = target.height
        let per = (rows + n - 1) / n
        let edges = (0...n).map { i in i == n ? rows : min(rows, (per * i + step - 1) / step * step) }
        let spans = (0..<n).map { edges[$0]..<edges[$0 + 1] }.filter { !$0.isEmpty }
        if spans.count <= 1 {
            uprightRows(source, into: target, map: map, layout: layout, rows: 0..<rows)
            return
        }
        DispatchQueue.concurrentPerform(iterations: spans.count) { i in
            uprightRows(source, into: target, map: map, layout: layout, rows: spans[i])
        }
    }

    /// Upright rows `rows` (in the first plane's rows; the lower bound on whole chroma rows) of the turn.
    static func uprightRows(_ source: Frame, into target: Frame, map: StorageMap, layout: PixelLayout, rows: Range<Int>) {
        for (p, plane) in layout.planes.enumerated() {
            guard let src0 = source.plane(p), let dst0 = target.plane(p) else { continue }
            let bw0 = layout.planeWidth(p, source.width), bh = layout.planeHeight(p, source.height)
            let uw = layout.planeWidth(p, target.width)
            let sls = source.lineSize(p), dls = target.lineSize(p)
            let py0 = rows.lowerBound >> plane.shiftY
            let py1 = rows.upperBound == target.height ? layout.planeHeight(p, target.height) : rows.upperBound >> plane.shiftY
            guard py1 > py0 else { continue }
            let uh = py1 - py0
            var src = src0, bw = bw0
            if map.swapsAxes {
                // Upright rows py0..<py1 are buffer columns py0..<py1 (counted from the right when flipped).
                src = src0 + (map.flipX ? bw0 - py1 : py0) * plane.bytesPerElement
                bw = uh
            } else if rows.lowerBound > 0 || rows.upperBound < target.height {
                // Not banded (whole pictures only): see upright(_:into:map:layout:bands:).
                continue
            }
            let dst = dst0 + py0 * dls
            switch plane.bytesPerElement {
            case 1 where map.swapsAxes: QuarterTurn.bytes(src, sls, bw, bh, dst, dls, uw, uh, map)
            case 2 where map.swapsAxes: QuarterTurn.pairs(src, sls, bw, bh, dst, dls, uw, uh, map)
            case 1: turn(UInt8.self, src, sls, bw, bh, dst, dls, uw, uh, map)
            case 2: turn(UInt16.self, src, sls, bw, bh, dst, dls, uw, uh, map)
            default: turn(UInt32.self, src, sls, bw, bh, dst, dls, uw, uh, map)
            }
        }
    }

    /// The plain element-by-element walk; also finishes the edges the block kernels leave.
    @inline(__always)
    static func turn<T: FixedWidthInteger>(_: T.Type, _ src: UnsafeMutablePointer<UInt8>, _ sls: Int, _ bw: Int, _ bh: Int,
                                           _ dst: UnsafeMutablePointer<UInt8>, _ dls: Int, _ uw: Int, _ uh: Int, _ map: StorageMap) {
        let size = MemoryLayout<T>.size
        let s = UnsafeMutableRawPointer(src), d = UnsafeMutableRawPointer(dst)
        if !map.swapsAxes {
            for y in 0..<uh {
                let by = map.flipY ? bh - 1 - y : y
                let srcRow = s + by * sls, dstRow = d + y * dls
                if !map.flipX {
                    memcpy(dstRow, srcRow, uw * size)
                } else {
                    let sp = srcRow.assumingMemoryBound(to: T.self), dp = dstRow.assumingMemoryBound(to: T.self)
                    for x in 0..<uw { dp[x] = sp[bw - 1 - x] }
                }
            }
            return
        }
        turnRegion(T.self, s, sls, bw, bh, d, dls, 0..<uw, 0..<uh, map)
    }

    /// Quarter turn of the upright region `xs` x `ys`, in square tiles.
    @inline(__always)
    static func turnRegion<T: FixedWidthInteger>(_: T.Type, _ s: UnsafeMutableRawPointer, _ sls: Int, _ bw: Int, _ bh: Int,
                                                 _ d: UnsafeMutableRawPointer, _ dls: Int, _ xs: Range<Int>, _ ys: Range<Int>, _ map: StorageMap) {
        guard !xs.isEmpty, !ys.isEmpty else { return }
        let size = MemoryLayout<T>.size
        // Upright (x, y) comes from buffer column (flipX ? bw-1-y : y), row (flipY ? bh-1-x : x).
        let tile = 32
        let rowStep = map.flipY ? -sls : sls
        for ty in stride(from: ys.lowerBound, to: ys.upperBound, by: tile) {
            let yEnd = min(ty + tile, ys.upperBound)
            for tx in stride(from: xs.lowerBound, to: xs.upperBound, by: tile) {
                let xEnd = min(tx + tile, xs.upperBound)
                for y in ty..<yEnd {
                    let bx = map.flipX ? bw - 1 - y : y
                    let by0 = map.flipY ? bh - 1 - tx : tx
                    var sp = s + by0 * sls + bx * size
                    let dp = (d + y * dls).assumingMemoryBound(to: T.self)
                    for x in tx..<xEnd {
                        dp[x] = sp.load(as: T.self)
                        sp += rowStep
                    }
                }
            }
        }
    }
}

/// Quarter turns in register-sized blocks: 16x16 bytes (luma, gray) in vector registers
/// (CKernels' avg_turn_bytes16), the 8-byte strips beside them and 4x4 byte pairs (NV12 chroma)
/// as eight or four 64-bit rows transposed with shifts and masks, stored as whole rows, instead
/// of one load per pixel walking down a buffer column.
enum QuarterTurn {
    @inline(__always)
    static func swapBits(_ a: inout UInt64, _ b: inout UInt64, _ shift: UInt64, _ mask: UInt64) {
        let t = ((a >> shift) ^ b) & mask
        b ^= t
        a ^= t << shift
    }

    static func bytes(_ src: UnsafeMutablePointer<UInt8>, _ sls: Int, _ bw: Int, _ bh: Int,
                      _ dst: UnsafeMutablePointer<UInt8>, _ dls: Int, _ uw: Int, _ uh: Int, _ map: StorageMap) {
        let s = UnsafeMutableRawPointer(src), d = UnsafeMutableRawPointer(dst)
        let uw16 = uw & ~15, uh16 = uh & ~15, uw8 = uw & ~7, uh8 = uh & ~7
        avg_turn_bytes16(src, sls, Int32(bw), Int32(bh), dst, dls, Int32(uw16), Int32(uh16), map.flipX ? 1 : 0, map.flipY ? 1 : 0)
        blocks8(s, sls, bw, bh, d, dls, uw16..<uw8, 0..<uh8, map)
        blocks8(s, sls, bw, bh, d, dls, 0..<uw16, uh16..<uh8, map)
        PictureTurn.turnRegion(UInt8.self, s, sls, bw, bh, d, dls, uw8..<uw, 0..<uh, map)
        PictureTurn.turnRegion(UInt8.self, s, sls, bw, bh, d, dls, 0..<uw8, uh8..<uh, map)
    }

    /// The 8x8 blocks of the upright region `xs` x `ys` (bounds multiples of 8).
    static func blocks8(_ s: UnsafeMutableRawPointer, _ sls: Int, _ bw: Int, _ bh: Int,
                        _ d: UnsafeMutableRawPointer, _ dls: Int, _ xs: Range<Int>, _ ys: Range<Int>, _ map: StorageMap) {
        for y0 in stride(from: ys.lowerBound, to: ys.upperBound, by: 8) {
            // Buffer columns of upright rows y0..y0+7, as one 8-byte load per buffer row.
            let bx = map.flipX ? bw - 8 - y0 : y0
            for x0 in stride(from: xs.lowerBound, to: xs.upperBound, by: 8) {
                @inline(__always) func row(_ i: Int) -> UInt64 {
                    let by = map.flipY ? bh - 1 - (x0 + i) : x0 + i
                    let v = UInt64(littleEndian: s.loadUnaligned(fromByteOffset: by * sls + bx, as: UInt64.self))
                    return map.flipX ? v.byteSwapped : v
                }
                var r = (row(0), row(1), row(2), row(3), row(4), row(5), row(6), row(7))
                swapBits(&r.0, &r.1, 8, 0x00FF_00FF_00FF_00FF)
                swapBits(&r.2, &r.3, 8, 0x00FF_00FF_00FF_00FF)
                swapBits(&r.4, &r.5, 8, 0x00FF_00FF_00FF_00FF)
                swapBits(&r.6, &r.7, 8, 0x00FF_00FF_00FF_00FF)
                swapBits(&r.0, &r.2, 16, 0x0000_FFFF_0000_FFFF)
                swapBits(&r.1, &r.3, 16, 0x0000_FFFF_0000_FFFF)
                swapBits(&r.4, &r.6, 16, 0x0000_FFFF_0000_FFFF)
                swapBits(&r.5, &r.7, 16, 0x0000_FFFF_0000_FFFF)
                swapBits(&r.0, &r.4, 32, 0x0000_0000_FFFF_FFFF)
                swapBits(&r.1, &r.5, 32, 0x0000_0000_FFFF_FFFF)
                swapBits(&r.2, &r.6, 32, 0x0000_0000_FFFF_FFFF)
                swapBits(&r.3, &r.7, 32, 0x0000_0000_FFFF_FFFF)
                let out = d + y0 * dls + x0
                out.storeBytes(of: r.0.littleEndian, toByteOffset: 0, as: UInt64.self)
                out.storeBytes(of: r.1.littleEndian, toByteOffset: dls, as: UInt64.self)
                out.storeBytes(of: r.2.littleEndian, toByteOffset: 2 * dls, as: UInt64.self)
                out.storeBytes(of: r.3.littleEndian, toByteOffset: 3 * dls, as: UInt64.self)
                out.storeBytes(of: r.4.littleEndian, toByteOffset: 4 * dls, as: UInt64.self)
                out.storeBytes(of: r.5.littleEndian, toByteOffset: 5 * dls, as: UInt64.self)
                out.storeBytes(of: r.6.littleEndian, toByteOffset: 6 * dls, as: UInt64.self)
                out.storeBytes(of: r.7.littleEndian, toByteOffset: 7 * dls, as: UInt64.self)
            }
        }
    }

    static func pairs(_ src: UnsafeMutablePointer<UInt8>, _ sls: Int, _ bw: Int, _ bh: Int,
                      _ dst: UnsafeMutablePointer<UInt8>, _ dls: Int, _ uw: Int, _ uh: Int, _ map: StorageMap) {
        let s = UnsafeMutableRawPointer(src), d = UnsafeMutableRawPointer(dst)
        let uw4 = uw & ~3, uh4 = uh & ~3
        let tile = 32
        @inline(__always) func reversePairs(_ v: UInt64) -> UInt64 {
            let w = (v >> 32) | (v << 32)
            return ((w >> 16) & 0x0000_FFFF_0000_FFFF) | ((w & 0x0000_FFFF_0000_FFFF) << 16)
        }
        for ty in stride(from: 0, to: uh4, by: tile) {
            for tx in stride(from: 0, to: uw4, by: tile) {
                for y0 in stride(from: ty, to: min(ty + tile, uh4), by: 4) {
                    let bx = map.flipX ? bw - 4 - y0 : y0
                    for x0 in stride(from: tx, to: min(tx + tile, uw4), by: 4) {
                        @inline(__always) func row(_ i: Int) -> UInt64 {
                            let by = map.flipY ? bh - 1 - (x0 + i) : x0 + i
                            let v = UInt64(littleEndian: s.loadUnaligned(fromByteOffset: by * sls + bx * 2, as: UInt64.self))
                            return map.flipX ? reversePairs(v) : v
                        }
                        var r = (row(0), row(1), row(2), row(3))
                        swapBits(&r.0, &r.1, 16, 0x0000_FFFF_0000_FFFF)
                        swapBits(&r.2, &r.3, 16, 0x0000_FFFF_0000_FFFF)
                        swapBits(&r.0, &r.2, 32, 0x0000_0000_FFFF_FFFF)
                        swapBits(&r.1, &r.3, 32, 0x0000_0000_FFFF_FFFF)
                        let out = d + y0 * dls + x0 * 2
                        out.storeBytes(of: r.0.littleEndian, toByteOffset: 0, as: UInt64.self)
                        out.storeBytes(of: r.1.littleEndian, toByteOffset: dls, as: UInt64.self)
                        out.storeBytes(of: r.2.littleEndian, toByteOffset: 2 * dls, as: UInt64.self)
                        out.storeBytes(of: r.3.littleEndian, toByteOffset: 3 * dls, as: UInt64.self)
                    }
                }
            }
        }
        PictureTurn.turnRegion(UInt16.self, s, sls, bw, bh, d, dls, uw4..<uw, 0..<uh, map)
        PictureTurn.turnRegion(UInt16.self, s, sls, bw, bh, d, dls, 0..<uw4, uh4..<uh, map)
    }
}
