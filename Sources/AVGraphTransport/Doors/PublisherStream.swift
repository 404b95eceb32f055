import AVGraph
import Foundation
import Synchronization

/// One admitted publisher's bytes (FLV for RTMP), from the listener's thread to the demuxer's
/// read callback. Bounded: when it holds `capacity`, the listener stops reading that socket and
/// TCP holds the rest at the publisher. Ends (EOF) when the publisher goes; the reader may
/// abandon it (a stream it refuses), which makes the listener close the connection.
package final class PublisherStream: Sendable {
    package let peer: String
    /// What the publisher asked to publish: RTMP's stream name and application, SRT's stream id
    /// (its `r=`) and no application.
    package let key: String
    package let app: String
    /// How its bytes are to be read (`flv`, `mpegts`); nil: as the source reads its own listener's.
    package let format: String?
    package let capacity: Int
    private struct Queued {
        var chunks: [[UInt8]] = []
        var head = 0
        var offset = 0
        var bytes = 0
        var ended = false
        var abandoned = false
    }
    /// The reader sleeps on it for bytes or the end.
    private let queued = ConditionLock(Queued())
    /// Wakes the listener (room again, or abandoned).
    private let wake: @Sendable () -> Void
    /// Told when bytes or the end arrive: a reader that takes them without waiting (serve's relay).
    private let readable = Mutex<(@Sendable () -> Void)?>(nil)

    package init(peer: String, key: String = "", app: String = "", format: String? = nil, capacity: Int = 8 << 20, wake: @escaping @Sendable () -> Void) {
        self.peer = peer
        self.key = key
        self.app = app
        self.format = format
        self.capacity = capacity
        self.wake = wake
    }

    package var isFull: Bool { let capacity = capacity; return queued.withLock { $0.bytes >= capacity } }
    package var isAbandoned: Bool { queued.withLock { $0.abandoned } }

    package func append(_ data: [UInt8]) {
        guard !data.isEmpty else { return }
        queued.withLockWakingAll { q in
            if !q.abandoned {
                q.chunks.append(data)
                q.bytes += data.count
            }
        }
        readable.withLock { $0 }?()
    }

    /// The publisher is gone: the reader gets what is queued, then the end.
    package func end() {
        queued.withLockWakingAll { $0.ended = true }
        readable.withLock { $0 }?()
    }

    /// Calls `notify` whenever bytes or the end arrive (on the listener's thread: it should only
    /// schedule the reading), and once now, for what came before; nil stops it.
    package func whenReadable(_ notify: (@Sendable () -> Void)?) {
        readable.withLock { $0 = notify }
        notify?()
    }

    /// The reader wants no more of it.
    package func abandon() {
        queued.withLockWakingAll { q in
            q.abandoned = true
            q.ended = true
            q.chunks.removeAll()
            q.bytes = 0
        }
        wake()
        readable.withLock { $0 }?()
    }

    /// Up to `into.count` bytes, waiting for some; 0 at the end.
    package func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let capacity = capacity
        let (n, resumed) = queued.wait { q -> (Int, Bool)? in
            if q.head == q.chunks.count && !q.ended { return nil }
            return Self.take(from: &q, into: buffer, capacity: capacity)
        }!
        if resumed { wake() }
        return n
    }

    /// Up to `into.count` bytes if there are any, without waiting: nil when none has come yet,
    /// 0 at the end.
    package func readNow(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let capacity = capacity
        let taken = queued.withLock { q -> (Int, Bool)? in
            if q.head == q.chunks.count && !q.ended { return nil }
            return Self.take(from: &q, into: buffer, capacity: capacity)
        }
        if taken?.1 == true { wake() }
        return taken?.0
    }

    /// Moves queued bytes into `buffer`; true as second when that made room for the listener.
    private static func take(from q: inout Queued, into buffer: UnsafeMutableRawBufferPointer, capacity: Int) -> (Int, Bool) {
        var n = 0
        while n < buffer.count && q.head < q.chunks.count {
            let chunk = q.chunks[q.head]
            let take = min(buffer.count - n, chunk.count - q.offset)
            let offset = q.offset
            chunk.withUnsafeBytes { buffer.baseAddress!.advanced(by: n).copyMemory(from: $0.baseAddress!.advanced(by: offset), byteCount: take) }
            n += take
            q.offset += take
            if q.offset == chunk.count {
                q.head += 1
                q.offset = 0
            }
        }
        let resumed = q.bytes >= capacity && q.bytes - n < capacity
        q.bytes -= n
        if q.head > 64 && q.head * 2 > q.chunks.count {
            q.chunks.removeFirst(q.head)
            q.head = 0
        }
        return (n, resumed)
    }
}
