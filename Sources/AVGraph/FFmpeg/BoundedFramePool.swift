import CFFmpeg
import Foundation
import Synchronization

/// Pictures of one geometry from a pool that never holds more than `limit` buffers; when every
/// buffer is still downstream `frame` returns nil instead of growing (the caller drops). Made
/// for ingest paths that must not wait (an app's capture callback), so taking a picture never
/// allocates or faults a page: the first `prewarm` buffers are allocated and touched up front,
/// and when a backlog needs more, the taking that finds none ready returns nil while one more
/// buffer is allocated and touched on another thread, ready for the next taking. Memory follows
/// the backlog that really happened, never past `limit`, and goes back to the system once the
/// backlog is over (PictureMemory: beyond `prewarm`, buffers unused for a second or two are
/// unmapped). Only a pool with no buffer at all allocates on the taking thread: its first picture.
public final class BoundedFramePool: Sendable {
    /// The bound, and the one buffer being made ready; shared with the preparing thread.
    final class Budget: Sendable {
        private struct Preparation {
            /// An address, not a pointer: the block crosses from the preparing thread by address.
            var spare: UInt?
            var preparing = false
        }
        /// Takings are serialized here, so `mapped` only grows under this lock (PictureMemory's
        /// own lock is taken inside it, never the other way round).
        private let preparation = Mutex(Preparation())
        let memory: PictureMemory
        let limit: Int
        init(memory: PictureMemory, limit: Int) {
            self.memory = memory
            self.limit = limit
        }
        deinit { if let spare = preparation.withLock({ $0.spare }) { munmap(UnsafeMutableRawPointer(bitPattern: spare), memory.blockSize) } }

        func take(synchronous: Bool) -> UnsafeMutableRawPointer? {
            if let b = memory.reuse() { return b }
            let (block, prepare) = preparation.withLock { p -> (UInt?, Bool) in
                if let ready = p.spare, let pointer = UnsafeMutableRawPointer(bitPattern: ready) {
                    p.spare = nil
                    memory.adopt(pointer)
                    return (ready, false)
                }
                let mapped = memory.mappedBlocks
                guard mapped < limit else { return (nil, false) }
                if synchronous || mapped == 0 { return (memory.allocate().map { UInt(bitPattern: $0) }, false) }
                if p.preparing { return (nil, false) }
                p.preparing = true
                return (nil, true)
            }
            if prepare { DispatchQueue.global(qos: .userInitiated).async { self.prepare() } }
            return block.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
        }

        private func prepare() {
            let size = memory.blockSize
            let buffer = PictureMemory.map(size)
            if let b = buffer { memset(b, 0, size) }
            let address = buffer.map { UInt(bitPattern: $0) }
            let keep = preparation.withLock { p in
                p.preparing = false
                let keep = p.spare == nil && memory.mappedBlocks < limit
                if keep { p.spare = address }
                return keep
            }
            if !keep, let b = buffer { munmap(b, size) }
        }
    }

    public let width: Int
    public let height: Int
    public let pixelFormat: AVPixelFormat
    public let pictureSize: Int
    public let limit: Int
    private let alignment = 32
    private let budget: Budget

    /// Buffers held now (in use or free): the memory a backlog costs while it lasts.
    public var allocatedBuffers: Int { budget.memory.mappedBlocks }

    /// `prewarm`: buffers to allocate and touch now (slow: for setup, not for a push path); the
    /// pool never gives these back. `window`: seconds of history that decide how many more to keep.
    public init(width: Int, height: Int, pixelFormat: AVPixelFormat, limit: Int, prewarm: Int, window: Double = 1) throws {
        pictureSize = try VideoFramePool.pictureBytes(width: width, height: height, pixelFormat: pixelFormat, alignment: alignment)
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.limit = limit
        let warm = min(max(prewarm, 0), limit)
        budget = Budget(memory: PictureMemory(bytes: pictureSize + VideoFramePool.padding, floor: warm, window: window), limit: limit)
        // Allocate and touch the first buffers now, then hand them back to the pool.
        var held: [UnsafeMutableRawPointer] = []
        for _ in 0..<warm {
            guard let b = budget.take(synchronous: true) else { break }
            memset(b, 0, budget.memory.blockSize)
            held.append(b)
        }
        for b in held { budget.memory.giveBack(b) }
    }

    /// A writable picture, or nil when all `limit` buffers are in use downstream (or while one
    /// more is being made ready for a backlog).
    public func frame(timeBase: Rational, orientation: Orientation = .up) -> Frame? {
        guard let block = budget.take(synchronous: false), let buf = budget.memory.buffer(over: block) else { return nil }
        return try? Frame.picture(over: buf, data: buf.pointee.data, width: width, height: height, format: pixelFormat,
                                  alignment: alignment, timeBase: timeBase, orientation: orientation)
    }
}
