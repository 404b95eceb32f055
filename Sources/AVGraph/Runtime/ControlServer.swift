import CFFmpeg
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The control socket of a running pipeline: a unix socket in a folder only the owner can
/// enter (0700), the socket itself 0600. JSON lines: one request a line, one reply a line;
/// `watch` turns the connection into the event stream. A bad line gets an error reply and the
/// connection goes on; nothing a client sends can stop or disturb the run except `stop`.
public final class ControlServer: @unchecked Sendable {
    public let path: String
    let run: PipelineRun
    private var listener: Int32 = -1
    private let lock = NSLock()
    private var watchers: [Int32] = []
    private var clients: Set<Int32> = []
    private var closed = false
    static let maxLine = 64 * 1024

    /// The socket path for a pipeline name: `$XDG_RUNTIME_DIR/avgraph/NAME.sock`, else `/tmp/avgraph-UID/NAME.sock`.
    public static func defaultPath(for pipeline: String) -> String {
        if let xdg = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], !xdg.isEmpty {
            return xdg + "/avgraph/\(pipeline).sock"
        }
        return "/tmp/avgraph-\(getuid())/\(pipeline).sock"
    }

    public init(run: PipelineRun, path: String) throws {
        self.run = run
        self.path = path
        try listen()
        run.events.addListener { [weak self] line in self?.broadcast(line) }
    }

    private func listen() throws {
        let dir = (path as NSString).deletingLastPathComponent
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            throw MediaError("control socket: cannot create folder \(dir): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard stat(dir, &st) == 0, st.st_uid == getuid(), (st.st_mode & 0o077) == 0 || dir == "/tmp" else {
            throw MediaError("control socket: folder \(dir) must belong to you with mode 0700")
        }
        let utf8 = Array(path.utf8)
        var addr = sockaddr_un()
        guard utf8.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw MediaError("control socket path too long: \(path)") }
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: utf8)
            raw[utf8.count] = 0
        }
        // A socket left by a run that died is stale; one that answers belongs to a live run.
        if access(path, F_OK) == 0 {
            let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            let live = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
            }
            Glibc.close(probe)
            if live { throw MediaError("control socket \(path) is in use by another running pipeline of the same name") }
            unlink(path)
        }
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw MediaError("control socket: \(String(cString: strerror(errno)))") }
        let old = umask(0o177)
        let bound = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(old)
        guard bound == 0 else { throw MediaError("control socket: cannot bind \(path): \(String(cString: strerror(errno)))") }
        chmod(path, 0o600)
        Glibc.listen(listener, 16)
        let t = Thread { [self] in acceptLoop() }
        t.name = "control"
        t.start()
    }

    public func close() {
        lock.lock()
        closed = true
        let all = clients
        lock.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        for fd in all { shutdown(fd, Int32(SHUT_RDWR)) }
        unlink(path)
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                lock.lock(); let done = closed; lock.unlock()
                if done || errno == EBADF || errno == EINVAL { return }
                continue
            }
            // Only the owner may steer the run, whatever the folder's mode.
            if avg_peer_uid(fd) != Int(getuid()) {
                send(fd, ["ok": false, "error": "permission denied: this pipeline belongs to another user"])
                Glibc.close(fd)
                continue
            }
            // A client that sends but never reads must not hold a server thread forever.
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            lock.lock(); clients.insert(fd); lock.unlock()
            let t = Thread { [self] in serve(fd) }
            t.name = "control-client"
            t.start()
        }
    }

    private func serve(_ fd: Int32) {
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        var discarding = false
        defer {
            lock.lock()
            clients.remove(fd)
            watchers.removeAll { $0 == fd }
            lock.unlock()
            Glibc.close(fd)
        }
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { return }
            for b in chunk[0..<n] {
                if b == 10 {
                    if discarding {
                        send(fd, ["ok": false, "error": "line longer than \(Self.maxLine) bytes"])
                        discarding = false
                    } else {
                        handle(line: buffer, fd: fd)
                    }
                    buffer.removeAll(keepingCapacity: true)
                } else if !discarding {
                    buffer.append(b)
                    if buffer.count > Self.maxLine { discarding = true; buffer.removeAll() }
                }
            }
        }
    }

    func send(_ fd: Int32, _ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        write(fd, Array(data) + [10])
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                // Gone, or not reading its replies: hang up on it; the run is not its hostage.
                shutdown(fd, Int32(SHUT_RDWR))
                return
            }
            off += n
        }
    }

    private func broadcast(_ line: String) {
        lock.lock()
        let fds = watchers
        lock.unlock()
        for fd in fds { write(fd, Array(line.utf8) + [10]) }
    }

    private func handle(line: [UInt8], fd: Int32) {
        if line.allSatisfy({ $0 == 32 || $0 == 13 || $0 == 9 }) { return }
        guard let obj = try? JSONSerialization.jsonObject(with: Data(line)), let req = obj as? [String: Any] else {
            send(fd, ["ok": false, "error": "malformed request: expected one JSON object a line, like {\"cmd\": \"stats\"}"])
            return
        }
        var reply = ControlCommands.handle(req, run: run) { [self] in
            lock.lock(); watchers.append(fd); lock.unlock()
        }
        if let id = req["id"] { reply["id"] = id }
        send(fd, reply)
    }
}
