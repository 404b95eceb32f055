import AVGraph
import CSrt
import Foundation
import Glibc

/// The WHIP listener's UDP side set up: the media socket bound, and the addresses its answer
/// advertises as host candidates. (Apart from the NIO code: NIO's modules hide Glibc's socket
/// type constants.)
enum WebRtcUdpSocket {
    static func bindUdp(_ host: String, _ port: Int) throws -> (Int32, Int) {
        func fail(_ what: String) -> MediaError { MediaError("cannot take WebRTC media on udp \(host):\(port): \(what): \(String(cString: strerror(errno)))") }
        let six = host.contains(":")
        let fd = socket(six ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw fail("socket") }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var size: Int32 = 4 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        var length: socklen_t
        if six {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = in_port_t(port).bigEndian
            guard inet_pton(AF_INET6, host, &a.sin6_addr) == 1 else { close(fd); throw MediaError("'\(host)' is not an IPv6 address") }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: a, as: sockaddr_in6.self) }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = in_port_t(port).bigEndian
            guard inet_pton(AF_INET, host, &a.sin_addr) == 1 else { close(fd); throw MediaError("'\(host)' is not an IPv4 address (write the address to listen on)") }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: a, as: sockaddr_in.self) }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        }
        let bound = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { let e = fail("bind"); close(fd); throw e }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) } }
        return (fd, UdpPeer(actual)?.portNumber ?? port)
    }

    /// Room for a burst to many viewers (a keyframe each) before the kernel refuses a datagram.
    static func enlargeSendBuffer(_ fd: Int32) {
        var size: Int32 = 8 << 20
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// What an unspecified bind answers as: loopback and this machine's other IPv4 addresses.
    static func localAddresses(_ host: String) -> [String] {
        guard host == "0.0.0.0" || host == "::" || host.isEmpty else { return [host] }
        var out = ["127.0.0.1"]
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return out }
        defer { freeifaddrs(list) }
        var p = list
        while let a = p {
            if let sa = a.pointee.ifa_addr, Int32(sa.pointee.sa_family) == AF_INET {
                var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
                var sin = UnsafeRawPointer(sa).load(as: sockaddr_in.self)
                inet_ntop(AF_INET, &sin.sin_addr, &text, socklen_t(text.count))
                let s = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !out.contains(s) { out.append(s) }
            }
            p = a.pointee.ifa_next
        }
        return out
    }

    /// An advertised name or address as an address (browsers take no DNS names in candidates).
    static func resolve(_ name: String) throws -> String {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &result) == 0, let first = result else { throw MediaError("webrtc-host '\(name)' does not resolve") }
        defer { freeaddrinfo(result) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard getnameinfo(first.pointee.ai_addr, first.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 else {
            throw MediaError("webrtc-host '\(name)' does not resolve")
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// An advertised `HOST` or `HOST:PORT` (`[V6]:PORT`): a server behind NAT whose public port
    /// differs from the one it binds gives the public one.
    static func candidate(_ entry: String, port: Int) throws -> (address: String, port: Int) {
        var host = entry, advertisedPort = port
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            host = String(entry[entry.index(after: entry.startIndex)..<close])
            let rest = entry[entry.index(after: close)...]
            if rest.hasPrefix(":") {
                guard let p = Int(rest.dropFirst()), (1...65535).contains(p) else { throw MediaError("webrtc-host '\(entry)': the port is 1 to 65535") }
                advertisedPort = p
            }
        } else if entry.filter({ $0 == ":" }).count == 1, let colon = entry.firstIndex(of: ":") {
            host = String(entry[..<colon])
            guard let p = Int(entry[entry.index(after: colon)...]), (1...65535).contains(p) else { throw MediaError("webrtc-host '\(entry)': the port is 1 to 65535") }
            advertisedPort = p
        }
        return (try resolve(host), advertisedPort)
    }
}

/// The loop a WebRTC port's thread runs (the WHIP listener's, the WHEP hub's): wait for a
/// datagram or a wake, take every datagram waiting, and count what came from nobody it knows,
/// said at most every 10 s so a flood costs one line.
struct WebRtcPortLoop {
    let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 2048)
    private var strangers = 0, reported = 0
    private var lastNote = -Double.infinity

    init(fd: Int32) { self.fd = fd }

    /// Waits up to 10 ms for a datagram on the port or a byte on `wake`; true when woken.
    func wait(wake: Int32) -> Bool {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 2, 10)
        return fds[1].revents != 0
    }

    /// Every datagram waiting (at most 512 a turn, so the timers run), each with its sender.
    mutating func receiveWaiting(_ body: ([UInt8], UdpPeer) -> Void) {
        for _ in 0..<512 {
            var from = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let n = withUnsafeMutablePointer(to: &from) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT), $0, &length) }
            }
            guard n > 0 else { return }
            guard let peer = UdpPeer(from) else { continue }
            body(Array(buffer[..<n]), peer)
        }
    }

    /// `length` bytes at `bytes` to `peer` from the port `fd`, without waiting: whether the kernel took them whole.
    @discardableResult
    static func send(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ length: Int, to peer: UdpPeer) -> Bool {
        peer.withSockaddr { address, size in sendto(fd, bytes, length, Int32(MSG_DONTWAIT), address, size) } == length
    }

    mutating func countStrangers(_ count: Int) { strangers += count }

    /// Datagrams from strangers not yet said, when it is time to say them.
    mutating func strangersToSay(now: Double) -> Int? {
        guard strangers > reported, now - lastNote >= 10 else { return nil }
        defer { reported = strangers; lastNote = now }
        return strangers - reported
    }

    /// Random letters and digits (ICE's ufrag and password, session ids).
    static func token(_ count: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }

    /// The local ufrag a STUN check's USERNAME names (`LOCAL:REMOTE`): which session it is for.
    static func checkedUfrag(_ datagram: [UInt8]) -> String? {
        guard StunMessage.looksLikeStun(datagram), let message = try? StunMessage.parse(datagram),
              let user = message.first(StunAttribute.username)?.text, let ufrag = user.split(separator: ":").first else { return nil }
        return String(ufrag)
    }
}
