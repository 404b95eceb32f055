import CFFmpeg
import Foundation

/// Pictures of one geometry from a pool that never holds more than `limit` buffers, all of them
/// allocated and touched up front: taking one never allocates or faults a page, and when every
/// buffer is still downstream `frame` returns nil instead of growing (the caller drops). Made
/// for ingest paths that must not wait (an app's capture callback).
/// Without `prewarm`, buffers are allocated on first use (up to `limit`).
public final class BoundedFramePool: @unchecked Sendable {
    /// Counts buffers handed out by the allocator; shared with FFmpeg's callbacks.
    final class Budget: @unchecked Sendable {
        let lock = NSLock()
        var allocated = 0
        let limit: Int
        init(limit: Int) { self.limit = limit }
        func take() -> Bool {
            lock.lock()
            defer { lock.unlock() }
            guard allocated < limit else { return false }
            allocated += 1
            return true
        }
    }

    public let width: Int
    public let height: Int
    public let pixelFormat: AVPixelFormat
    public let pictureSize: Int
    public let limit: Int
    private let alignment = 32
    private var pool: OpaquePointer?

    /// `prewarm`: allocate and touch every buffer now (slow: for setup, not for a push path).
    public init(width: Int, height: Int, pixelFormat: AVPixelFormat, limit: Int, prewarm: Bool = true) throws {
        guard width > 0, height > 0 else { throw MediaError("picture size \(width)x\(height) is empty") }
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.limit = limit
        let size = av_image_get_buffer_size(pixelFormat, Int32(width), Int32(height), Int32(alignment))
        try AVFailure.check(size, "av_image_get_buffer_size")
        pictureSize = Int(size)
        let budget = Unmanaged.passRetained(Budget(limit: limit)).toOpaque()
        pool = av_buffer_pool_init2(Int(size) + 64, budget, { opaque, size in
            guard let opaque, Unmanaged<Budget>.fromOpaque(opaque).takeUnretainedValue().take() else { return nil }
            return av_buffer_alloc(size)
        }, { opaque in
            if let opaque { Unmanaged<Budget>.fromOpaque(opaque).release() }
        })
        guard pool != nil else { throw MediaError("av_buffer_pool_init2 failed") }
        // Allocate and touch every buffer now, then hand them back to the pool.
        var held: [UnsafeMutablePointer<AVBufferRef>?] = []
        for _ in 0..<(prewarm ? limit : 0) {
            guard let b = av_buffer_pool_get(pool) else { break }
            memset(b.pointee.data, 0, Int(size))
            held.append(b)
        }
        for i in held.indices { av_buffer_unref(&held[i]) }
    }

    deinit { av_buffer_pool_uninit(&pool) }

    /// A writable picture, or nil when all `limit` buffers are in use downstream.
    public func frame(timeBase: Rational, orientation: Orientation = .up) -> Frame? {
        guard let buf = av_buffer_pool_get(pool) else { return nil }
        return try? Frame.picture(over: buf, data: buf.pointee.data, width: width, height: height, format: pixelFormat,
                                  alignment: alignment, timeBase: timeBase, orientation: orientation)
    }
}
