import AVGraphTesting
import Foundation
import XCTest

/// A real RTMP server for the tests: Debian's nginx with libnginx-mod-rtmp (scripts/setup
/// installs them), on a free loopback port, recording every publish session to its own .flv
/// so a test can decode exactly what the server received.
final class NginxRtmp: @unchecked Sendable {
    static let module = "/usr/lib/nginx/modules/ngx_rtmp_module.so"
    static var isAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") && FileManager.default.fileExists(atPath: module)
    }

    let dir: String
    let recordings: String
    let port: Int
    private var process: Process?
    private let link: ShapedLink?

    /// On `port` (default: a free one), started now unless `start` is false (a destination that appears later).
    /// Inside `link`'s namespace (on its loopback) when given.
    init(port: Int? = nil, start: Bool = true, in link: ShapedLink? = nil) throws {
        self.link = link
        dir = CLI.scratch("nginx")
        recordings = dir + "/recordings"
        try FileManager.default.createDirectory(atPath: recordings, withIntermediateDirectories: true)
        // nginx's worker may run as another user (nobody) when the tests run as root.
        chmod(recordings, 0o777)
        self.port = try port ?? LoopbackPort.free()
        CLI.write("""
        load_module \(Self.module);
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(dir)/nginx.pid;
        error_log \(dir)/error.log info;
        events { worker_connections 64; }
        rtmp {
            server {
                listen 127.0.0.1:\(self.port);
                application live {
                    live on;
                    record all;
                    record_path \(recordings);
                    record_unique on;
                }
            }
        }
        """, to: dir + "/nginx.conf")
        if start { try self.start() }
    }

    /// The server's process, for signalling it (SIGSTOP: a server that stalls); nil when stopped.
    var processIdentifier: Int32? { process?.processIdentifier }

    deinit { stop() }

    func url(_ stream: String = "stream") -> String { "rtmp://127.0.0.1:\(port)/live/\(stream)" }

    /// Starts (or restarts) the server and waits until it accepts connections.
    func start() throws {
        if let link {
            process = try link.start(["/usr/sbin/nginx", "-p", dir, "-c", dir + "/nginx.conf", "-e", dir + "/error.log"])
            try link.waitForListener(port: port)
            return
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/sbin/nginx")
        p.arguments = ["-p", dir, "-c", dir + "/nginx.conf", "-e", dir + "/error.log"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let end = Date().addingTimeInterval(10)
        while Date() < end {
            if LoopbackPort.accepts(port) { return }
            if !p.isRunning { break }
            usleep(50_000)
        }
        let log = (try? String(contentsOfFile: dir + "/error.log", encoding: .utf8)) ?? ""
        stop()
        throw NSError(domain: "nginx", code: 1, userInfo: [NSLocalizedDescriptionKey: "nginx did not start on port \(port): \(log)"])
    }

    /// Stops the server the way an operator does (SIGTERM: connections are cut).
    func stop() {
        guard let p = process else { return }
        process = nil
        if p.isRunning { p.terminate() }
        p.waitUntilExit()
    }

    /// Recorded sessions, oldest first.
    var sessions: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: recordings)) ?? []
        let paths = names.filter { $0.hasSuffix(".flv") }.map { recordings + "/" + $0 }
        func mtime(_ p: String) -> Date {
            ((try? FileManager.default.attributesOfItem(atPath: p))?[.modificationDate] as? Date) ?? .distantPast
        }
        return paths.sorted { (mtime($0), $0) < (mtime($1), $1) }
    }
}

/// A TCP proxy on loopback that passes the client's bytes to the server at most
/// `bytesPerSecond` (a slow uplink); the server's replies go back unthrottled. Small socket
/// buffers make the slowness reach the client within a moment, as on a real congested link.
final class ThrottlingProxy: @unchecked Sendable {
    let port: Int
    private let upstream: Int
    private let bytesPerSecond: Double
    private let listener: Int32
    private let lock = NSLock()
    private var stopped = false
    private var sockets: [Int32] = []
    private let done = DispatchGroup()

    init(to upstream: Int, bytesPerSecond: Double) throws {
        self.upstream = upstream
        self.bytesPerSecond = bytesPerSecond
        port = try LoopbackPort.free()
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        // Accepted sockets inherit it: a small receive window pushes back on the client at once.
        var small: Int32 = 16 * 1024
        setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var addr = LoopbackPort.loopback(port)
        let bound = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 4) == 0 else { close(listener); throw NSError(domain: "listen", code: Int(errno)) }
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        let open = sockets
        sockets.removeAll()
        lock.unlock()
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
        _ = done.wait(timeout: .now() + 5)
        for fd in open { close(fd) }
    }

    private var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }

    private func acceptLoop() {
        while !isStopped {
            let client = accept(listener, nil, nil)
            if client < 0 { if isStopped { return } else { continue } }
            let server = LoopbackPort.connect(upstream)
            if server < 0 { close(client); continue }
            lock.lock()
            sockets += [client, server]
            lock.unlock()
            pump(from: client, to: server, rate: bytesPerSecond)
            pump(from: server, to: client, rate: nil)
        }
    }

    private func pump(from src: Int32, to dst: Int32, rate: Double?) {
        done.enter()
        let thread = Thread { [self] in
            defer { shutdown(dst, Int32(SHUT_WR)); done.leave() }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let start = Date()
            var sent = 0.0
            while !isStopped {
                // Read no more than the rate allows over the next 50 ms.
                let chunk = rate.map { max(256, min(buffer.count, Int($0 / 20))) } ?? buffer.count
                let n = read(src, &buffer, chunk)
                if n <= 0 { return }
                var off = 0
                while off < n {
                    let w = buffer[off..<n].withUnsafeBytes { send(dst, $0.baseAddress, n - off, Int32(MSG_NOSIGNAL)) }
                    if w <= 0 { return }
                    off += w
                }
                if let rate {
                    sent += Double(n)
                    let ahead = sent / rate - Date().timeIntervalSince(start)
                    if ahead > 0 { usleep(UInt32(ahead * 1e6)) }
                }
            }
        }
        thread.start()
    }
}
