import CFFmpeg
import Foundation

/// Pictures of one geometry from a pool that never holds more than `limit` buffers; when every
/// buffer is still downstream `frame` returns nil instead of growing (the caller drops). Made
/// for ingest paths that must not wait (an app's capture callback), so taking a picture never
/// allocates or faults a page: the first `prewarm` buffers are allocated and touched up front,
/// and when a backlog needs more, the taking that finds none ready returns nil while one more
/// buffer is allocated and touched on another thread, ready for the next taking. Memory follows
/// the backlog that really happened, never past `limit`. (Only a pool with no buffer at all
/// allocates on the taking thread: its first picture.)
public final class BoundedFramePool: @unchecked Sendable {
    /// Buffers handed to FFmpeg's pool, and the one being made ready; shared with its callbacks.
    final class Budget: @unchecked Sendable {
        let lock = NSLock()
        var allocated = 0
        var spare: UnsafeMutablePointer<AVBufferRef>?
        var preparing = false
        var synchronous = true
        let limit: Int
        init(limit: Int) { self.limit = limit }
        deinit { av_buffer_unref(&spare) }

        func take(size: Int) -> UnsafeMutablePointer<AVBufferRef>? {
            lock.lock()
            defer { lock.unlock() }
            if let ready = spare {
                spare = nil
                allocated += 1
                return ready
            }
            guard allocated < limit else { return nil }
            if synchronous || allocated == 0 {
                allocated += 1
                return av_buffer_alloc(size)
            }
            if !preparing {
                preparing = true
                DispatchQueue.global(qos: .userInitiated).async { self.prepare(size: size) }
            }
            return nil
        }

        private func prepare(size: Int) {
            var buffer = av_buffer_alloc(size)
            if let b = buffer { memset(b.pointee.data, 0, size) }
            lock.lock()
            defer { lock.unlock() }
            preparing = false
            if spare == nil, allocated < limit { spare = buffer } else { av_buffer_unref(&buffer) }
        }
    }

    public let width: Int
    public let height: Int
    public let pixelFormat: AVPixelFormat
    public let pictureSize: Int
    public let limit: Int
    private let alignment = 32
    private var pool: OpaquePointer?
    private let budget: Budget

    /// Buffers allocated so far (in use or free in the pool): the memory a backlog has cost.
    public var allocatedBuffers: Int {
        budget.lock.lock()
        defer { budget.lock.unlock() }
        return budget.allocated
    }

    /// `prewarm`: buffers to allocate and touch now (slow: for setup, not for a push path).
    public init(width: Int, height: Int, pixelFormat: AVPixelFormat, limit: Int, prewarm: Int) throws {
        pictureSize = try VideoFramePool.pictureBytes(width: width, height: height, pixelFormat: pixelFormat, alignment: alignment)
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.limit = limit
        budget = Budget(limit: limit)
        pool = av_buffer_pool_init2(pictureSize + VideoFramePool.padding, Unmanaged.passRetained(budget).toOpaque(), { opaque, size in
            guard let opaque else { return nil }
            return Unmanaged<Budget>.fromOpaque(opaque).takeUnretainedValue().take(size: size)
        }, { opaque in
            if let opaque { Unmanaged<Budget>.fromOpaque(opaque).release() }
        })
        guard pool != nil else { throw MediaError("av_buffer_pool_init2 failed") }
        // Allocate and touch the first buffers now, then hand them back to the pool.
        var held: [UnsafeMutablePointer<AVBufferRef>?] = []
        for _ in 0..<min(max(prewarm, 0), limit) {
            guard let b = av_buffer_pool_get(pool) else { break }
            memset(b.pointee.data, 0, pictureSize)
            held.append(b)
        }
        for i in held.indices { av_buffer_unref(&held[i]) }
        budget.lock.lock()
        budget.synchronous = false
        budget.lock.unlock()
    }

    deinit { av_buffer_pool_uninit(&pool) }

    /// A writable picture, or nil when all `limit` buffers are in use downstream (or while one
    /// more is being made ready for a backlog).
    public func frame(timeBase: Rational, orientation: Orientation = .up) -> Frame? {
        guard let buf = av_buffer_pool_get(pool) else { return nil }
        return try? Frame.picture(over: buf, data: buf.pointee.data, width: width, height: height, format: pixelFormat,
                                  alignment: alignment, timeBase: timeBase, orientation: orientation)
    }
}
