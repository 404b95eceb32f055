import Foundation

/// One admitted publisher's bytes (FLV for RTMP), from the listener's thread to the demuxer's
/// read callback. Bounded: when it holds `capacity`, the listener stops reading that socket and
/// TCP holds the rest at the publisher. Ends (EOF) when the publisher goes; the reader may
/// abandon it (a stream it refuses), which makes the listener close the connection.
final class PublisherStream: @unchecked Sendable {
    let peer: String
    /// What the publisher asked to publish: RTMP's stream name and application, SRT's stream id
    /// (its `r=`) and no application.
    let key: String
    let app: String
    /// How its bytes are to be read (`flv`, `mpegts`); nil: as the source reads its own listener's.
    let format: String?
    let capacity: Int
    private let condition = NSCondition()
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    private var bytes = 0
    private var ended = false
    private var abandoned = false
    /// Wakes the listener (room again, or abandoned).
    private let wake: @Sendable () -> Void

    init(peer: String, key: String = "", app: String = "", format: String? = nil, capacity: Int = 8 << 20, wake: @escaping @Sendable () -> Void) {
        self.peer = peer
        self.key = key
        self.app = app
        self.format = format
        self.capacity = capacity
        self.wake = wake
    }

    var isFull: Bool { condition.lock(); defer { condition.unlock() }; return bytes >= capacity }
    var isAbandoned: Bool { condition.lock(); defer { condition.unlock() }; return abandoned }

    func append(_ data: [UInt8]) {
        guard !data.isEmpty else { return }
        condition.lock()
        if !abandoned {
            chunks.append(data)
            bytes += data.count
            condition.signal()
        }
        condition.unlock()
    }

    /// The publisher is gone: the reader gets what is queued, then the end.
    func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// The reader wants no more of it.
    func abandon() {
        condition.lock()
        abandoned = true
        ended = true
        chunks.removeAll()
        bytes = 0
        condition.broadcast()
        condition.unlock()
        wake()
    }

    /// Up to `into.count` bytes, waiting for some; 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        condition.lock()
        while head == chunks.count && !ended { condition.wait() }
        var n = 0
        while n < buffer.count && head < chunks.count {
            let chunk = chunks[head]
            let take = min(buffer.count - n, chunk.count - offset)
            chunk.withUnsafeBytes { buffer.baseAddress!.advanced(by: n).copyMemory(from: $0.baseAddress!.advanced(by: offset), byteCount: take) }
            n += take
            offset += take
            if offset == chunk.count {
                head += 1
                offset = 0
            }
        }
        let resumed = bytes >= capacity && bytes - n < capacity
        bytes -= n
        if head > 64 && head * 2 > chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
        condition.unlock()
        if resumed { wake() }
        return n
    }
}
