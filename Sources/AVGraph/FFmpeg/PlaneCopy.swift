import CFFmpeg
import Foundation

/// The one copy at an ingest boundary: media handed over by someone else's memory (an app's
/// pixel buffer, a socket's receive buffer) lands in a pooled `AVFrame`, plane by plane, with
/// FFmpeg's `av_image_copy_plane` (memcpy per row, or one memcpy when the strides match).
public enum PlaneCopy {
    /// One source plane: its first byte and the bytes from one row to the next.
    public struct Plane {
        public var base: UnsafeRawPointer
        public var stride: Int
        public init(base: UnsafeRawPointer, stride: Int) {
            self.base = base
            self.stride = stride
        }
    }

    /// Copies every plane of a `width` x `height` picture into `frame` (same format and size).
    public static func copyPicture(_ planes: [Plane], into frame: Frame, layout: PixelLayout) {
        for (p, src) in planes.enumerated() where p < layout.planes.count {
            guard let dst = frame.plane(p) else { continue }
            let rowBytes = layout.planeWidth(p, frame.width) * layout.planes[p].bytesPerElement
            av_image_copy_plane(dst, Int32(frame.lineSize(p)), src.base.assumingMemoryBound(to: UInt8.self), Int32(src.stride),
                                Int32(rowBytes), Int32(layout.planeHeight(p, frame.height)))
        }
    }

    /// Bytes of one row of plane `p` and its row count, for a tightly packed picture.
    public static func packedPlaneSizes(layout: PixelLayout, width: Int, height: Int) -> [(rowBytes: Int, rows: Int)] {
        layout.planes.indices.map { p in
            (layout.planeWidth(p, width) * layout.planes[p].bytesPerElement, layout.planeHeight(p, height))
        }
    }

    /// Copies interleaved samples into a packed audio frame.
    public static func copySamples(_ src: UnsafeRawPointer, byteCount: Int, into frame: Frame) {
        memcpy(frame.audioData(), src, byteCount)
    }
}

/// The zero-copy alternative: a frame whose planes are someone else's memory, kept alive by
/// retaining `owner` (a pixel buffer object) until the last reference downstream is released.
public enum BorrowedPicture {
    final class Box { let owner: AnyObject; init(_ o: AnyObject) { owner = o } }

    public static func frame(width: Int, height: Int, format: AVPixelFormat, planes: [PlaneCopy.Plane], owner: AnyObject,
                             timeBase: Rational, orientation: Orientation) -> Frame? {
        guard let av = av_frame_alloc() else { return nil }
        let frame = Frame(owning: av, timeBase: timeBase, orientation: orientation)
        av.pointee.width = Int32(width)
        av.pointee.height = Int32(height)
        av.pointee.format = format.rawValue
        av.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        let opaque = Unmanaged.passRetained(Box(owner)).toOpaque()
        let first = UnsafeMutablePointer(mutating: planes[0].base.assumingMemoryBound(to: UInt8.self))
        guard let buf = av_buffer_create(first, planes[0].stride * height, { opaque, _ in
            if let opaque { Unmanaged<Box>.fromOpaque(opaque).release() }
        }, opaque, Int32(AV_BUFFER_FLAG_READONLY)) else {
            Unmanaged<Box>.fromOpaque(opaque).release()
            return nil
        }
        av.pointee.buf.0 = buf
        let data = frame.dataPointers, lines = frame.lineSizes
        for (i, p) in planes.prefix(4).enumerated() {
            data[i] = UnsafeMutablePointer(mutating: p.base.assumingMemoryBound(to: UInt8.self))
            lines[i] = Int32(p.stride)
        }
        av.pointee.extended_data = data
        return frame
    }
}
