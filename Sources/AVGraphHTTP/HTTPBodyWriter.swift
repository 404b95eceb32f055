import NIOCore
import NIOHTTP1
import Synchronization

/// The body of a `.chunked` response: pieces queued by whoever has them, written on the
/// connection's event loop in order while the socket (or HTTP/2 stream) takes them. HTTP/1.1
/// frames them as chunks (NIOHTTP1 does, for a response without Content-Length); HTTP/2 as DATA
/// frames. A client that does not read cannot grow the queue past `maxQueuedBytes`: while its
/// channel is unwritable with more than that waiting, it is closed.
///
/// A HEAD request's writer is ended before `open` gets it: its bytes are dropped, its `onClose`
/// runs at once, and the head went out alone.
public final class HTTPBodyWriter: Sendable {
    static let maxQueuedBytes = 4 * 1024 * 1024

    private let channel: any Channel
    /// Writes the end of the response and returns the connection to its next request; on the loop.
    private let writeEnd: @Sendable () -> Void
    private let state: Mutex<State>

    private struct State {
        var queued: [[UInt8]] = []
        var queuedBytes = 0
        var drainScheduled = false
        /// `end` or `close` was called: nothing more is taken.
        var closing = false
        var endAsked = false
        /// The response is over (its end written, the channel closed, or the peer gone).
        var over = false
        var onClose: [@Sendable () -> Void] = []
    }

    init(channel: any Channel, alreadyEnded: Bool = false, writeEnd: @escaping @Sendable () -> Void) {
        self.channel = channel
        self.writeEnd = writeEnd
        state = Mutex(State(closing: alreadyEnded, over: alreadyEnded))
    }

    /// Queues `bytes` to go out after those queued before; from any thread. Dropped once the
    /// response ends or its client has left.
    public func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        let schedule = state.withLock { s -> Bool in
            guard !s.closing else { return false }
            s.queued.append(bytes)
            s.queuedBytes += bytes.count
            defer { s.drainScheduled = true }
            return !s.drainScheduled
        }
        if schedule { channel.eventLoop.execute { self.drain() } }
    }

    /// Ends the response after what is queued.
    public func end() {
        let schedule = state.withLock { s -> Bool in
            guard !s.closing else { return false }
            (s.closing, s.endAsked) = (true, true)
            defer { s.drainScheduled = true }
            return !s.drainScheduled
        }
        if schedule { channel.eventLoop.execute { self.drain() } }
    }

    /// Aborts the response: the connection (an HTTP/2 stream: the stream) is closed, queued bytes dropped.
    public func close() {
        let first = state.withLock { s -> Bool in
            defer { s.closing = true }
            return !s.over
        }
        if first { channel.close(promise: nil) }
    }

    /// Whether bytes written now can still go out: false once ended, closed or the client left.
    public var isOpen: Bool { state.withLock { !$0.closing && !$0.over } }

    /// `f` is called once when the response is over, however it ends (at once if it is over).
    public func onClose(_ f: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.over { return true }
            s.onClose.append(f)
            return false
        }
        if now { f() }
    }

    /// Writes what is queued if the channel takes more now, and the end after it; on the loop,
    /// again whenever the channel becomes writable.
    func drain() {
        let writable = channel.isWritable
        let (pieces, ending, overflowing) = state.withLock { s -> ([[UInt8]], Bool, Bool) in
            s.drainScheduled = false
            guard !s.over else { return ([], false, false) }
            guard writable else { return ([], false, s.queuedBytes > Self.maxQueuedBytes) }
            defer { (s.queued, s.queuedBytes) = ([], 0) }
            return (s.queued, s.endAsked, false)
        }
        if overflowing {
            channel.close(promise: nil)
            return
        }
        if !pieces.isEmpty {
            var buffer = channel.allocator.buffer(capacity: pieces.reduce(0) { $0 + $1.count })
            for piece in pieces { buffer.writeBytes(piece) }
            channel.writeAndFlush(HTTPServerResponsePart.body(.byteBuffer(buffer)), promise: nil)
        }
        if ending {
            writeEnd()
            responseIsOver()
        }
    }

    /// The connection (or stream) closed: nothing more goes out; the `onClose` callbacks run.
    func responseIsOver() {
        let callbacks = state.withLock { s -> [@Sendable () -> Void] in
            guard !s.over else { return [] }
            (s.over, s.closing) = (true, true)
            (s.queued, s.queuedBytes) = ([], 0)
            defer { s.onClose = [] }
            return s.onClose
        }
        for callback in callbacks { callback() }
    }
}
