import AVGraph
import Foundation

/// Peer addresses, for the network sources that own their accept loop (SRT, on libsrt's sockets).
package enum PeerAddress {
    /// `HOST:PORT` (`[HOST]:PORT` for IPv6) of a socket address, numeric.
    package static func describe(_ a: UnsafePointer<sockaddr>, _ length: socklen_t) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST)), service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        guard getnameinfo(a, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV) == 0 else {
            return "unknown"
        }
        let h = String(filledBuffer: host), p = String(filledBuffer: service)
        return h.contains(":") ? "[\(h)]:\(p)" : "\(h):\(p)"
    }
}
