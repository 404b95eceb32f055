import CFFmpeg
import Foundation

/// The one copy at an ingest boundary: media handed over by someone else's memory (an app's
/// pixel buffer, a socket's receive buffer) lands in a pooled `AVFrame`, plane by plane, with
/// FFmpeg's `av_image_copy_plane` (memcpy per row, or one memcpy when the strides match).
public enum PlaneCopy {
    /// One source plane: its first byte and the bytes from one row to the next.
    public struct Plane: @unchecked Sendable {
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
