import Foundation

/// A UDP peer's address as a small value (a dictionary key per packet costs no allocation), and
/// back to a `sockaddr` to send to it.
package struct UdpPeer: Hashable, Sendable, CustomStringConvertible {
    let family: sa_family_t
    let port: in_port_t
    /// IPv4: the address in `low`; IPv6: its 16 bytes in network order across both.
    let high: UInt64
    let low: UInt64
    let scope: UInt32

    package init?(_ storage: sockaddr_storage) {
        var s = storage
        switch Int32(s.ss_family) {
        case AF_INET:
            let a = withUnsafeBytes(of: &s) { $0.load(as: sockaddr_in.self) }
            (family, port, high, low, scope) = (s.ss_family, a.sin_port, 0, UInt64(a.sin_addr.s_addr), 0)
        case AF_INET6:
            let a = withUnsafeBytes(of: &s) { $0.load(as: sockaddr_in6.self) }
            let words = withUnsafeBytes(of: a.sin6_addr) { ($0.load(fromByteOffset: 0, as: UInt64.self), $0.load(fromByteOffset: 8, as: UInt64.self)) }
            (family, port, high, low, scope) = (s.ss_family, a.sin6_port, words.0, words.1, a.sin6_scope_id)
        default:
            return nil
        }
    }

    /// The address without its port.
    package var host: [UInt64] { [UInt64(family), high, low, UInt64(scope)] }

    package var portNumber: Int { Int(in_port_t(bigEndian: port)) }

    /// Calls `body` with the address as a `sockaddr` and its length.
    package func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        if Int32(family) == AF_INET {
            var a = sockaddr_in()
            a.sin_family = family
            a.sin_port = port
            a.sin_addr.s_addr = in_addr_t(truncatingIfNeeded: low)
            return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        var a = sockaddr_in6()
        a.sin6_family = family
        a.sin6_port = port
        a.sin6_scope_id = scope
        withUnsafeMutableBytes(of: &a.sin6_addr) {
            $0.storeBytes(of: high, toByteOffset: 0, as: UInt64.self)
            $0.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
        }
        return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
    }

    /// `HOST:PORT`, numeric (`[HOST]:PORT` for IPv6).
    package var description: String { withSockaddr { PeerAddress.describe($0, $1) } }
}
