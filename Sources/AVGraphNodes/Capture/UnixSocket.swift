import Foundation

/// Thin POSIX wrappers for a unix stream socket: listen, accept, connect, read, write.
public enum UnixSocket {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    static func address(_ path: String) throws -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw Failure(description: "socket path '\(path)' is empty or longer than \(capacity - 1) bytes")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }

    /// A listening socket at `path` (owner-only permissions); a stale socket file there is replaced.
    public static func listen(path: String) throws -> Int32 {
        var addr = try address(path)
        var st = stat()
        if lstat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFSOCK else { throw Failure(description: "'\(path)' exists and is not a socket") }
            unlink(path)
        }
        try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        let old = umask(0o077)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        umask(old)
        guard bound == 0, Glibc.listen(fd, 4) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "cannot listen on '\(path)': \(message)")
        }
        return fd
    }

    public static func connect(path: String) throws -> Int32 {
        var addr = try address(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        let r = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard r == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "cannot connect to '\(path)': \(message)")
        }
        return fd
    }

    /// A connection waiting on `fd`, made non-blocking; nil if none.
    public static func accept(_ fd: Int32) -> Int32? {
        let c = Glibc.accept(fd, nil, nil)
        guard c >= 0 else { return nil }
        _ = fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK)
        return c
    }

    /// Which of `fds` are readable (or hung up) within `timeout` seconds.
    public static func readable(_ fds: [Int32], timeout: Double) -> [Bool] {
        var p = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let n = poll(&p, nfds_t(p.count), Int32(timeout * 1000))
        guard n > 0 else { return fds.map { _ in false } }
        return p.map { $0.revents != 0 }
    }

    /// Reads what is available into `buffer`; 0 at end of stream, -1 when nothing is there yet,
    /// -2 on an error.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        let n = Glibc.read(fd, buffer, count)
        if n >= 0 { return n }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2
    }

    /// Writes every byte (blocking); throws when the peer has gone. Never raises SIGPIPE.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < bytes.count {
            let n = send(fd, bytes.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL))
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "write: \(String(cString: strerror(errno)))")
            }
            done += n
        }
    }
}
