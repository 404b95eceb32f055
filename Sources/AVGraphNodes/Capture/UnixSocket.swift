import AVGraph
import Foundation

/// Thin POSIX wrappers for a unix stream socket: listen, accept, connect, read, write.
public enum UnixSocket {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A listening socket at `path` (owner-only permissions). A stale socket of ours there is
    /// replaced; anything else there (a file, another user's socket, a live socket) is refused
    /// and left alone.
    public static func listen(path: String) throws -> Int32 {
        do { return try PrivateSocket.listen(path: path, backlog: 4) } catch let e as PrivateSocket.Failure {
            throw Failure(description: e.description)
        }
    }

    /// Connects to a socket of this user only (the file and the listening process: SO_PEERCRED);
    /// another user's socket throws `PrivateSocket.Failure` with `foreign` set, naming the user.
    public static func connect(path: String) throws -> Int32 { try PrivateSocket.connect(path: path) }

    /// A connection waiting on `fd`, made non-blocking; nil if none. A peer running as another
    /// user (SO_PEERCRED) is closed at once and reported through `refused` with its uid.
    public static func accept(_ fd: Int32, refused: (Int) -> Void = { _ in }) -> Int32? {
        let c = Glibc.accept(fd, nil, nil)
        guard c >= 0 else { return nil }
        guard PrivateSocket.peerIsOwner(c) else {
            refused(PrivateSocket.peerUID(c))
            close(c)
            return nil
        }
        _ = fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK)
        return c
    }

    /// Which of `fds` are readable (or hung up), waiting for one of them or for `stop` to become
    /// readable; an empty answer when `stop` did.
    static func readable(_ fds: [Int32], orStop stop: StopEvent) -> [Bool] {
        var p = ([stop.fd] + fds).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while poll(&p, nfds_t(p.count), -1) < 0 && errno == EINTR {}
        if p[0].revents != 0 { return [] }
        return p.dropFirst().map { $0.revents != 0 }
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
