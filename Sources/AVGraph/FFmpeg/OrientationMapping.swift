import CFFmpeg
import Foundation

/// The one definition of what an orientation tag means for pixels, shared by everything that
/// writes a turned picture (`testsrc`, `rawvideo` tags) and everything that stands it upright (`orient`).
///
/// A tag says how the stored buffer must be turned to look upright (EXIF /
/// CGImagePropertyOrientation, as ReplayKit tags screen buffers). Following this project's
/// contract (Orientation.swift): `left` stores the picture with its top at the buffer's left
/// side and is made upright by turning it 90° clockwise; `right` is the opposite quarter turn;
/// `down` a half turn; an `-mirrored` tag is the same turn applied after a horizontal flip of
/// the buffer (so `up-mirrored` is a left-right flip, `down-mirrored` a top-bottom flip).
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
        // Top at the buffer's left: upright row y is buffer column y; upright x runs up the buffer.
        case .left: return StorageMap(swapsAxes: true, flipX: false, flipY: true)
        case .right: return StorageMap(swapsAxes: true, flipX: true, flipY: false)
        case .leftMirrored: return StorageMap(swapsAxes: true, flipX: true, flipY: true)
        case .rightMirrored: return StorageMap(swapsAxes: true, flipX: false, flipY: false)
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
    /// Writes the upright picture of `source` (tagged by `map`) into `target`, whose size must be
    /// the upright size. Quarter turns go in square tiles so both pictures are walked cache-friendly.
    public static func upright(_ source: Frame, into target: Frame, map: StorageMap, layout: PixelLayout) {
        for (p, plane) in layout.planes.enumerated() {
            guard let src = source.plane(p), let dst = target.plane(p) else { continue }
            let bw = layout.planeWidth(p, source.width), bh = layout.planeHeight(p, source.height)
            let uw = layout.planeWidth(p, target.width), uh = layout.planeHeight(p, target.height)
            let sls = source.lineSize(p), dls = target.lineSize(p)
            switch plane.bytesPerElement {
            case 1: turn(UInt8.self, src, sls, bw, bh, dst, dls, uw, uh, map)
            case 2: turn(UInt16.self, src, sls, bw, bh, dst, dls, uw, uh, map)
            default: turn(UInt32.self, src, sls, bw, bh, dst, dls, uw, uh, map)
            }
        }
    }

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
        // Upright (x, y) comes from buffer column (flipX ? bw-1-y : y), row (flipY ? bh-1-x : x).
        let tile = 32
        let rowStep = map.flipY ? -sls : sls
        for ty in stride(from: 0, to: uh, by: tile) {
            let yEnd = min(ty + tile, uh)
            for tx in stride(from: 0, to: uw, by: tile) {
                let xEnd = min(tx + tile, uw)
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
