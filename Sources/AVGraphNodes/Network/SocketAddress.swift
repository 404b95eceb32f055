import AVGraph
import Foundation

/// TCP listening sockets and peer addresses, for the network sources that own their accept loop.
enum SocketAddress {
    /// `HOST:PORT` (`[HOST]:PORT` for IPv6) of a socket address, numeric.
    static func describe(_ a: UnsafePointer<sockaddr>, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST)), service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        guard getnameinfo(a, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV) == 0 else {
            return "unknown"
        }
        let h = String(filledBuffer: host), p = String(filledBuffer: service)
        return h.contains(":") ? "[\(h)]:\(p)" : "\(h):\(p)"
    }

    /// A non-blocking TCP socket listening on `host:port` (`0.0.0.0` or `::` for every interface).
    static func listen(host: String, port: Int) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let h = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let r = getaddrinfo(h.isEmpty ? nil : h, String(port), &hints, &list)
        guard r == 0, let first = list else { throw MediaError("cannot listen on \(host):\(port): \(String(cString: gai_strerror(r)))") }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw MediaError("cannot listen on \(host):\(port): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, Glibc.listen(fd, 64) == 0 else {
            let e = String(cString: strerror(errno))
            close(fd)
            throw MediaError("cannot listen on \(host):\(port): \(e)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    /// The next pending connection, non-blocking, with its peer's address; nil when none waits.
    static func accept(_ listener: Int32) -> (fd: Int32, peer: String)? {
        var addr = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.accept(listener, $0, &len) }
        }
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let peer = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { describe($0, len) } }
        return (fd, peer)
    }
}
