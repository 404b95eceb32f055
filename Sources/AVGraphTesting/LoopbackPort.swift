import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Ports on 127.0.0.1 for tests that start servers, safe when tests run in parallel processes.
///
/// A port the kernel hands out for `bind(0)` comes from the ephemeral range, the same range
/// outgoing connections take their source ports from: in a parallel run another test's ffmpeg
/// could be connected from it by the time this test listens. So ports are drawn at random below
/// that range, and kept only when both TCP and UDP (SRT) can bind them right now.
public enum LoopbackPort {
    /// A port on 127.0.0.1 nobody listens on right now, for TCP and for UDP.
    public static func free() throws -> Int {
        let ceiling = min(ephemeralLow(), 32_768)
        let floor = 10_000
        for _ in 0..<200 {
            let port = Int.random(in: floor..<ceiling)
            if canBind(port, type: SOCK_STREAM), canBind(port, type: SOCK_DGRAM) { return port }
        }
        throw NSError(domain: "LoopbackPort", code: Int(EADDRINUSE),
                      userInfo: [NSLocalizedDescriptionKey: "no free loopback port in \(floor)..<\(ceiling)"])
    }

    public static func loopback(_ port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return addr
    }

    /// A connected socket to 127.0.0.1:`port`, or -1.
    public static func connect(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = loopback(port)
        let ok = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if !ok { close(fd); return -1 }
        return fd
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    public static func accepts(_ port: Int) -> Bool {
        let fd = connect(port)
        if fd >= 0 { close(fd) }
        return fd >= 0
    }

    private static func canBind(_ port: Int, type: __socket_type) -> Bool {
        let fd = socket(AF_INET, Int32(type.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = loopback(port)
        return withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// The low end of the kernel's ephemeral port range (32768 unless the machine changed it).
    private static func ephemeralLow() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
              let low = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap({ Int($0) }),
              low > 11_000 else { return 32_768 }
        return low
    }
}
