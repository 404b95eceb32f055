import AVGraph
import Foundation

/// What a network source's own server (RTMP, SRT) hands its reader: the admitted publishers
/// (`next()`), warnings about refused peers (`takeNotes()`), and the stop that ends both.
/// Subclasses accept the connections, in `start()`, until `stop()`.
class PublisherHandoff: @unchecked Sendable {
    let condition = NSCondition()
    private var ready: [PublisherStream] = []
    private var notes: [String] = []
    private var stopped = false

    /// Starts taking connections.
    func start() {}

    /// Ends taking connections and every connection; `next()` returns nil from then on.
    func stop() { _ = markStopped() }

    /// Marks the handoff stopped and wakes `next()`; true the first time.
    final func markStopped() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let first = !stopped
        stopped = true
        condition.broadcast()
        return first
    }

    var isStopped: Bool { condition.lock(); defer { condition.unlock() }; return stopped }

    /// The next admitted publisher, waiting for one; nil once stopped.
    func next() -> PublisherStream? {
        condition.lock()
        defer { condition.unlock() }
        while ready.isEmpty && !stopped { condition.wait() }
        return stopped ? nil : ready.removeFirst()
    }

    func announce(_ stream: PublisherStream) {
        condition.lock()
        ready.append(stream)
        condition.signal()
        condition.unlock()
    }

    /// Warnings since the last call (refused connections), each naming the peer.
    func takeNotes() -> [String] {
        condition.lock()
        defer { condition.unlock() }
        let n = notes
        notes.removeAll()
        return n
    }

    func note(_ message: String) {
        condition.lock()
        // Bounded: a flood of refused connections must not grow memory between two reports.
        if notes.count < 100 { notes.append(message) }
        condition.unlock()
    }

    static func seconds(_ s: Double) -> String { s == s.rounded() ? "\(Int(s)) s" : "\(s) s" }
}

/// A `PublisherHandoff` whose connections are taken on a thread of its own (the SRT listener,
/// on libsrt's epoll), woken through a pipe by `stop()` and `poke()`. Subclasses implement `run()`.
class PublisherListener: PublisherHandoff, @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var started = false
    /// Written to by `stop()` and `poke()`: the listener's wait includes the read end.
    var wake: [Int32] = [-1, -1]
    let threadName: String

    init(threadName: String) throws {
        self.threadName = threadName
        guard pipe(&wake) == 0 else { throw MediaError("\(threadName): pipe: \(String(cString: strerror(errno)))") }
        for fd in wake {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
    }

    deinit {
        for fd in wake { close(fd) }
    }

    /// The accept loop, on the listener's thread, until `isStopped`.
    func run() {}

    override func start() {
        started = true
        let t = Thread { [self] in
            run()
            done.signal()
        }
        t.name = threadName
        t.start()
    }

    /// Ends the accept loop and every connection; `next()` returns nil from then on.
    override func stop() {
        guard markStopped() else { return }
        poke()
        if started { done.wait() }
    }

    /// Wakes the listener's wait (a stream has room again, was abandoned, or stop).
    func poke() {
        var b: UInt8 = 1
        _ = write(wake[1], &b, 1)
    }

    func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wake[0], &buffer, buffer.count) > 0 {}
    }
}
