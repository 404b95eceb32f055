import CFFmpeg
import Foundation
import Synchronization

/// Picture buffers of one size that go back to the system after a backlog. FFmpeg's
/// `AVBufferPool` keeps every buffer it ever made until the pool ends, so one encoder stall
/// left a live pipeline holding its backlog's pictures for the rest of the run; and glibc
/// serves a freed multi-megabyte block's successors from its heap (the mmap threshold rises to
/// the largest block freed), where a free rarely reaches the system. Here each block is its own
/// anonymous mapping, and a block coming back is unmapped at once when the pool holds more than
/// the most pictures in use over the last `window` (at least `floor`): in steady state the
/// same blocks go round, after a backlog the extra ones are given back within about two windows.
final class PictureMemory: Sendable {
    let blockSize: Int
    /// Blocks never given back (what the owner prewarms).
    let floor: Int
    private let window: UInt64
    private struct Blocks {
        /// Addresses, not pointers: a block crosses threads by address (whoever took it owns its bytes).
        var free: [UInt] = []
        var inUse = 0
        var peak = (current: 0, previous: 0)
        var windowStart: UInt64
        /// Blocks mapped now (free or out).
        var mapped = 0
    }
    private let blocks: Mutex<Blocks>

    init(bytes: Int, floor: Int = 0, window: Double = 1) {
        let page = Int(getpagesize())
        blockSize = (bytes + page - 1) / page * page
        self.floor = floor
        self.window = UInt64(window * 1e9)
        blocks = Mutex(Blocks(windowStart: DispatchTime.now().uptimeNanoseconds))
    }

    deinit {
        for b in blocks.withLock({ $0.free }) { munmap(UnsafeMutableRawPointer(bitPattern: b), blockSize) }
    }

    /// Blocks mapped now, read under the lock.
    var mappedBlocks: Int { blocks.withLock { $0.mapped } }

    /// A free block, or nil when there is none (`allocate` then maps one).
    func reuse() -> UnsafeMutableRawPointer? {
        blocks.withLock { s in
            guard let b = s.free.popLast() else { return nil }
            noteTaken(&s)
            return UnsafeMutableRawPointer(bitPattern: b)
        }
    }

    /// A new block (its pages fault on first touch), counted as in use.
    func allocate() -> UnsafeMutableRawPointer? {
        guard let b = Self.map(blockSize) else { return nil }
        blocks.withLock {
            $0.mapped += 1
            noteTaken(&$0)
        }
        return b
    }

    /// A mapped block made ready elsewhere, handed over as in use.
    func adopt(_ b: UnsafeMutableRawPointer) {
        blocks.withLock {
            $0.mapped += 1
            noteTaken(&$0)
        }
    }

    static func map(_ size: Int) -> UnsafeMutableRawPointer? {
        let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        return p == MAP_FAILED ? nil : p
    }

    /// A block the last picture using it has let go of: kept for reuse, or unmapped when the
    /// pool holds more than recent use needs.
    func giveBack(_ b: UnsafeMutableRawPointer) {
        let floor = floor
        let unmap = blocks.withLock { s in
            s.inUse -= 1
            rollWindow(&s)
            let keep = max(floor, s.peak.current, s.peak.previous)
            let unmap = s.mapped > keep
            if unmap { s.mapped -= 1 } else { s.free.append(UInt(bitPattern: b)) }
            return unmap
        }
        if unmap { munmap(b, blockSize) }
    }

    /// An `AVBufferRef` over `block` that gives it back here when the last reference goes.
    func buffer(over block: UnsafeMutableRawPointer) -> UnsafeMutablePointer<AVBufferRef>? {
        let opaque = Unmanaged.passRetained(self).toOpaque()
        guard let ref = av_buffer_create(block.assumingMemoryBound(to: UInt8.self), blockSize, { opaque, data in
            guard let opaque else { return }
            let memory = Unmanaged<PictureMemory>.fromOpaque(opaque).takeRetainedValue()
            if let data { memory.giveBack(UnsafeMutableRawPointer(data)) }
        }, opaque, 0) else {
            Unmanaged<PictureMemory>.fromOpaque(opaque).release()
            giveBack(block)
            return nil
        }
        return ref
    }

    private func noteTaken(_ s: inout Blocks) {
        s.inUse += 1
        rollWindow(&s)
        s.peak.current = max(s.peak.current, s.inUse)
    }

    private func rollWindow(_ s: inout Blocks) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - s.windowStart >= window else { return }
        // A window with no activity at all says nothing about the one before it.
        s.peak = now - s.windowStart >= 2 * window ? (s.inUse, s.inUse) : (s.inUse, s.peak.current)
        s.windowStart = now
    }
}
