import AVGraph
import Foundation
import Synchronization

/// What a network source's own server (RTMP, SRT) hands its reader: the admitted publishers
/// (`next()`), warnings about refused peers (`takeNotes()`), and the stop that ends both.
/// Subclasses accept the connections, in `start()`, until `stop()`.
// @unchecked: a base class (RTMP, SRT and the relay derive from it) cannot be checked Sendable; its own
// state is in `queue`, and each subclass says what its own `var`s are.
package class PublisherHandoff: @unchecked Sendable {
    private struct Queue {
        var ready: [PublisherStream] = []
        var notes: [String] = []
        var stopped = false
    }
    /// The reader sleeps on it in `next()`.
    private let queue = ConditionLock(Queue())
    /// Told when a note is added: the node that reports notes is woken to report it now.
    private let noted = Mutex<(@Sendable () -> Void)?>(nil)

    package final func whenNoted(_ wake: (@Sendable () -> Void)?) { noted.withLock { $0 = wake } }

    /// Starts taking connections.
    package func start() {}

    /// Ends taking connections and every connection; `next()` returns nil from then on.
    package func stop() { _ = markStopped() }

    /// Marks the handoff stopped and wakes `next()`; true the first time.
    package final func markStopped() -> Bool {
        queue.withLockWakingAll { q in
            defer { q.stopped = true }
            return !q.stopped
        }
    }

    package var isStopped: Bool { queue.withLock { $0.stopped } }

    /// The next admitted publisher, waiting for one; nil once stopped.
    package func next() -> PublisherStream? {
        queue.wait { q -> PublisherStream?? in
            if q.stopped { return .some(nil) }
            return q.ready.isEmpty ? nil : .some(q.ready.removeFirst())
        }!
    }

    package func announce(_ stream: PublisherStream) {
        queue.withLockWakingAll { $0.ready.append(stream) }
    }

    /// Warnings since the last call (refused connections), each naming the peer.
    package func takeNotes() -> [String] {
        queue.withLock { q in
            defer { q.notes.removeAll() }
            return q.notes
        }
    }

    package func note(_ message: String) {
        // Bounded: a flood of refused connections must not grow memory between two reports.
        queue.withLock { if $0.notes.count < 100 { $0.notes.append(message) } }
        noted.withLock { $0 }?()
    }

    package static func seconds(_ s: Double) -> String { s == s.rounded() ? "\(Int(s)) s" : "\(s) s" }
}

/// A `PublisherHandoff` whose connections are taken on a thread of its own (the SRT listener,
/// on libsrt's epoll), woken through a pipe by `stop()` and `poke()`. Subclasses implement `run()`.
// @unchecked: derived from (SRT, the relay): see PublisherHandoff.
package class PublisherListener: PublisherHandoff, @unchecked Sendable {
    /// Whether the listener's thread started, and whether it is done.
    private let thread = ConditionLock((started: false, done: false))
    /// Written to by `stop()` and `poke()`: the listener's wait includes the read end.
    package let wake: [Int32]
    package let threadName: String

    package init(threadName: String) throws {
        self.threadName = threadName
        var wake: [Int32] = [-1, -1]
        guard pipe(&wake) == 0 else { throw MediaError("\(threadName): pipe: \(String(cString: strerror(errno)))") }
        for fd in wake {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        self.wake = wake
    }

    deinit {
        for fd in wake { close(fd) }
    }

    /// The accept loop, on the listener's thread, until `isStopped`.
    package func run() {}

    package override func start() {
        thread.withLock { $0.started = true }
        let t = Thread { [self] in
            run()
            thread.withLockWakingAll { $0.done = true }
        }
        t.name = threadName
        t.start()
    }

    /// Ends the accept loop and every connection; `next()` returns nil from then on.
    package override func stop() {
        guard markStopped() else { return }
        poke()
        _ = thread.wait { $0.started && !$0.done ? nil : true }
    }

    /// Wakes the listener's wait (a stream has room again, was abandoned, or stop).
    package func poke() {
        var b: UInt8 = 1
        _ = write(wake[1], &b, 1)
    }

    package func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wake[0], &buffer, buffer.count) > 0 {}
    }
}
