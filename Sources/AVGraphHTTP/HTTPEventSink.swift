import NIOCore
import NIOHTTP1
import Synchronization

/// An open event stream (`text/event-stream`): lines queued by whoever has them (the run's event
/// queue), written on the connection's event loop while the socket takes them. At most
/// `maxQueued` wait, the oldest dropped first, so a client that does not read loses old lines and
/// never holds the run or grows its memory.
public final class HTTPEventSink: Sendable {
    static let maxQueued = 512
    private let channel: any Channel
    private let pending = Mutex(Pending())

    private struct Pending {
        var lines: [[UInt8]] = []
        var drainScheduled = false
    }

    init(channel: any Channel) { self.channel = channel }

    /// Queues bytes to go out as they are (a whole event, `data: ...\n\n`); from any thread.
    public func send(_ bytes: [UInt8]) {
        let schedule = pending.withLock { p -> Bool in
            if p.lines.count >= Self.maxQueued { p.lines.removeFirst(p.lines.count - Self.maxQueued + 1) }
            p.lines.append(bytes)
            defer { p.drainScheduled = true }
            return !p.drainScheduled
        }
        if schedule { channel.eventLoop.execute { self.drain() } }
    }

    /// Writes what is queued, if the socket takes more now; called again when it becomes writable.
    func drain() {
        let writable = channel.isWritable
        let lines = pending.withLock { p -> [[UInt8]] in
            p.drainScheduled = false
            guard writable else { return [] }
            defer { p.lines.removeAll() }
            return p.lines
        }
        guard !lines.isEmpty, channel.isActive else { return }
        var buffer = channel.allocator.buffer(capacity: lines.reduce(0) { $0 + $1.count })
        for line in lines { buffer.writeBytes(line) }
        channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(buffer)), promise: nil)
    }
}
