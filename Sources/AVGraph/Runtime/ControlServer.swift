import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The control socket of a running pipeline: a unix socket in a folder only the owner can
/// enter (0700), the socket itself 0600, every connection checked with SO_PEERCRED. JSON lines:
/// one request a line, one reply a line; `watch` turns the connection into the event stream.
/// A bad line gets an error reply and the connection goes on; nothing a client sends can stop or
/// disturb the run except `stop`.
///
/// Nothing here ever blocks on a client: replies and events go into the client's own outbound
/// queue (at most `maxQueuedBytes`), which is written without blocking, by the client's thread
/// for replies and by one writer thread for events. A client whose queue overflows (a watcher
/// that does not read) is hung up on. At most `maxClients` connections at once; the next one
/// gets an error line and is closed.
public final class ControlServer: Sendable {
    public let path: String
    let run: PipelineRun
    public static let maxClients = 256
    static let maxQueuedBytes = 1 << 20
    static let maxLine = 64 * 1024

    private let listener: Int32
    private let identity: [UInt]
    /// Every client's fd, queue and state; the accept thread sleeps on it when out of fds, until
    /// a client leaves or the server closes.
    private let shared = ConditionLock(Shared())
    /// Wakes the writer thread when events were queued (a pipe: read end, write end).
    private let wake: [Int32]

    private struct Shared {
        /// By `Client.id`.
        var clients: [Int: Client] = [:]
        var closed = false
        var nextID = 0
        /// Counts fds freed by clients leaving.
        var freed = 0
    }

    struct Client {
        let id: Int
        /// Open while `open`; closed only by `finish`, under the server's lock.
        let fd: Int32
        var open = true
        var watching = false
        /// Its socket refused more (EAGAIN): no send is tried until poll says it takes more.
        var blocked = false
        var chunks: [[UInt8]] = []
        var offset = 0
        var queued = 0
    }

    /// The socket path for a pipeline name: `$XDG_RUNTIME_DIR/avgraph/NAME.sock`, else `/tmp/avgraph-UID/NAME.sock`.
    public static func defaultPath(for pipeline: String) -> String { PrivateSocket.expectedPath(pipeline) }

    public init(run: PipelineRun, path: String) throws {
        self.run = run
        self.path = path
        var wake: [Int32] = [-1, -1]
        guard pipe(&wake) == 0 else { throw MediaError("control socket: pipe: \(String(cString: strerror(errno)))") }
        for fd in wake { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        self.wake = wake
        let folder = (path as NSString).deletingLastPathComponent
        do {
            // The default folder is made and checked (ours, 0700, not a symlink) before use.
            if folder == (PrivateSocket.expectedPath("x") as NSString).deletingLastPathComponent { _ = try PrivateSocket.runtimeFolder() }
            listener = try PrivateSocket.listen(path: path, backlog: 64)
        } catch let e as PrivateSocket.Failure {
            throw MediaError("control socket: \(e.description)")
        }
        identity = PrivateSocket.identity(of: path)
        run.events.addListener { [weak self] line in self?.broadcast(line) }
        let accepter = Thread { [self] in acceptLoop() }
        accepter.name = "control"
        accepter.start()
        let writer = Thread { [self] in writeLoop() }
        writer.name = "control-writer"
        writer.start()
    }

    // The wake pipe outlives every thread that writes to it (they hold the server).
    deinit { for fd in wake { Glibc.close(fd) } }

    public func close() {
        // Wakes the accept thread if it waits for a descriptor.
        let first = shared.withLockWakingAll { s in
            if s.closed { return false }
            s.closed = true
            for c in s.clients.values where c.open { shutdown(c.fd, Int32(SHUT_RDWR)) }
            return true
        }
        guard first else { return }
        // The accept thread closes the listener itself once accept returns: no fd is closed under it.
        shutdown(listener, Int32(SHUT_RDWR))
        wakeWriter()
        // Only the socket we bound: a file put there since is not ours to delete.
        PrivateSocket.remove(path: path, identity: identity)
    }

    /// Out of fds: back off until a client leaves or the server closes; an fd freed elsewhere in
    /// the process gives no signal, so the backoff also ends after 100 ms.
    private func waitForDescriptor() {
        var seen: Int?
        _ = shared.wait(until: Monotonic.now + 0.1) { s -> Bool? in
            if seen == nil { seen = s.freed }
            return s.closed || s.freed != seen ? true : nil
        }
    }

    private var isClosed: Bool { shared.withLock { $0.closed } }

    private func acceptLoop() {
        defer { Glibc.close(listener) }
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if isClosed || errno == EBADF || errno == EINVAL { return }
                if errno == EMFILE || errno == ENFILE { waitForDescriptor() }
                continue
            }
            // Only the owner may steer the run, whatever the folder's mode.
            if !PrivateSocket.peerIsOwner(fd) {
                let uid = PrivateSocket.peerUID(fd)
                refuse(fd, "permission denied: this pipeline belongs to another user")
                run.events.emit(.warning(.init("control socket: refused a connection from another user (uid \(uid))")))
                continue
            }
            let id: Int? = shared.withLock { s in
                guard s.clients.count < Self.maxClients && !s.closed else { return nil }
                s.nextID += 1
                s.clients[s.nextID] = Client(id: s.nextID, fd: fd)
                return s.nextID
            }
            guard let id else {
                refuse(fd, "too many control clients (at most \(Self.maxClients) at once); try again later")
                continue
            }
            let t = Thread { [self] in serve(id, fd: fd) }
            t.name = "control-client"
            t.stackSize = 256 << 10
            t.start()
        }
    }

    private func refuse(_ fd: Int32, _ message: String) {
        let bytes = ControlReply.refused(message).line + [10]
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        Glibc.close(fd)
    }

    private func serve(_ client: Int, fd: Int32) {
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        var discarding = false
        defer { finish(client) }
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            for b in chunk[0..<n] {
                if b == 10 {
                    if discarding {
                        reply(client, ControlReply.refused("line longer than \(Self.maxLine) bytes").line)
                        discarding = false
                    } else {
                        handle(line: buffer, client)
                    }
                    buffer.removeAll(keepingCapacity: true)
                } else if !discarding {
                    buffer.append(b)
                    if buffer.count > Self.maxLine { discarding = true; buffer.removeAll() }
                }
            }
        }
    }

    /// The client's thread, when its connection ended: the only place its fd is closed.
    private func finish(_ client: Int) {
        // Wakes the accept thread if it waits for a descriptor.
        shared.withLockWakingAll { s in
            guard let c = s.clients.removeValue(forKey: client) else { return }
            Glibc.close(c.fd)
            s.freed += 1
        }
        // The writer may be polling this fd: it builds its list again, so it never waits on an fd reused by another.
        wakeWriter()
    }

    private func reply(_ client: Int, _ line: [UInt8]) {
        let rest = shared.withLock { s in
            guard var c = s.clients[client] else { return false }
            defer { s.clients[client] = c }
            Self.enqueue(line + [10], &c)
            let rest = !c.blocked && !Self.flush(&c)
            if rest { c.blocked = true }
            return rest
        }
        // What the socket did not take now is the writer's, once the client reads.
        if rest { wakeWriter() }
    }

    /// Under the lock: adds a line to the client's queue, or hangs up on a client that has let
    /// `maxQueuedBytes` pile up (its thread then sees the end and closes).
    private static func enqueue(_ bytes: [UInt8], _ client: inout Client) {
        guard client.open else { return }
        if client.queued + bytes.count > Self.maxQueuedBytes {
            client.chunks.removeAll()
            client.offset = 0
            client.queued = 0
            client.watching = false
            shutdown(client.fd, Int32(SHUT_RDWR))
            return
        }
        client.chunks.append(bytes)
        client.queued += bytes.count
    }

    /// Under the lock: writes what the socket takes now, without waiting. True when all was sent.
    @discardableResult
    private static func flush(_ client: inout Client) -> Bool {
        while client.open, let first = client.chunks.first {
            let n = first[client.offset...].withUnsafeBytes {
                Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return false }
                // Gone: its thread will see the end and close.
                client.chunks.removeAll()
                client.queued = 0
                shutdown(client.fd, Int32(SHUT_RDWR))
                return true
            }
            client.offset += n
            client.queued -= n
            if client.offset == first.count {
                client.chunks.removeFirst()
                client.offset = 0
            }
        }
        return true
    }

    private func broadcast(_ line: String) {
        let bytes = Array(line.utf8) + [10]
        let any = shared.withLock { s in
            var any = false
            for id in s.clients.keys where s.clients[id]!.watching {
                Self.enqueue(bytes, &s.clients[id]!)
                any = true
            }
            return any
        }
        if any { wakeWriter() }
    }

    private func wakeWriter() {
        var one: UInt8 = 1
        _ = Glibc.write(wake[1], &one, 1)
    }

    /// Sends queued events to every watcher: whatever each socket takes now, then waits until a
    /// socket can take more or new events arrive.
    private func writeLoop() {
        var drain = [UInt8](repeating: 0, count: 256)
        while true {
            // A blocked client is not tried again at every event (200 stuck watchers would cost
            // 200 failed sends per event), only when poll says its socket takes more.
            let waitingClients: [(id: Int, fd: Int32)]? = shared.withLock { s in
                if s.closed { return nil }
                var waiting: [(id: Int, fd: Int32)] = []
                for id in s.clients.keys where !s.clients[id]!.chunks.isEmpty {
                    if !s.clients[id]!.blocked && !Self.flush(&s.clients[id]!) { s.clients[id]!.blocked = true }
                    if s.clients[id]!.blocked { waiting.append((id, s.clients[id]!.fd)) }
                }
                return waiting
            }
            guard let waiting = waitingClients else { return }
            let waitingFDs = waiting.map(\.fd)
            // The fds may be closed and reused while polling: a wrong wake-up only costs a retry,
            // since every send happens under the lock after checking the client is still open.
            var fds = [pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)] + waitingFDs.map { pollfd(fd: $0, events: Int16(POLLOUT), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if fds[0].revents != 0 { while Glibc.read(wake[0], &drain, drain.count) > 0 {} }
            // Writable, or hung up (the send then says so): poll reports both, and a client that
            // leaves wakes this loop (`finish`), so no retry timer is needed.
            shared.withLock { s in
                for (i, c) in waiting.enumerated() where fds[i + 1].revents != 0 || ready < 0 { s.clients[c.id]?.blocked = false }
            }
        }
    }

    private func handle(line: [UInt8], _ client: Int) {
        if line.allSatisfy({ $0 == 32 || $0 == 13 || $0 == 9 }) { return }
        var watch = false
        reply(client, run.answer(controlLine: line) { watch = true })
        if watch {
            // After the reply is queued, so `watching: true` comes before the first event.
            shared.withLock { s in
                if let open = s.clients[client]?.open { s.clients[client]!.watching = open }
            }
        }
    }
}
