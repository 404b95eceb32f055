import AVGraph
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Opens a client's TCP socket itself, before SwiftNIO takes it (`withConnectedSocket`): the
/// connect can be cut short by a `CancelFlag` and a deadline, the send buffer is kept small
/// before the connection grows it, and the caller keeps a second descriptor of the same socket
/// for reading TCP_INFO (`UplinkProbe`) that stays valid until the caller closes it, whatever
/// NIO does with its own.
package enum TcpConnector {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// A connected, non-blocking socket to `host:port`; every address the name resolves to is
    /// tried in turn within `timeout` seconds.
    package static func connect(host: String, port: Int, timeout: Double, sendBuffer: Int32, cancel: CancelFlag) throws(Failure) -> Int32 {
        let deadline = Monotonic.now + timeout
        var hints = addrinfo()
        hints.ai_protocol = Int32(IPPROTO_TCP)  // stream sockets only (SOCK_STREAM is not visible beside CSrt)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(list) }
        var reason = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let a = entry {
            entry = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            guard fd >= 0 else { reason = String(cString: strerror(errno)); continue }
            var size = sendBuffer
            // Before connecting: the window scale is agreed in the handshake.
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            do {
                try finishConnect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen, deadline: deadline, cancel: cancel)
                return fd
            } catch {
                close(fd)
                reason = error.description
                if cancel.isCancelled || Monotonic.now >= deadline { break }
            }
        }
        throw Failure(description: reason)
    }

    private static func finishConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t,
                                      deadline: Double, cancel: CancelFlag) throws(Failure) {
        if Glibc.connect(fd, address, length) == 0 { return }
        guard errno == EINPROGRESS else { throw Failure(description: String(cString: strerror(errno))) }
        // In slices of 100 ms, as libavformat polled its interrupt callback: a cancel ends it soon.
        while true {
            if cancel.isCancelled { throw Failure(description: "cancelled") }
            let left = deadline - Monotonic.now
            if left <= 0 { throw Failure(description: "connection timed out") }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let n = poll(&p, 1, Int32(min(left, 0.1) * 1000) + 1)
            if n < 0 && errno != EINTR { throw Failure(description: String(cString: strerror(errno))) }
            guard n > 0 else { continue }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            if error != 0 { throw Failure(description: String(cString: strerror(error))) }
            return
        }
    }
}
