import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where an HTTP server of the run listens (`--metrics`, `--http`), and whether that is loopback.
public struct HTTPAddress: Sendable {
    public var host: String
    public var port: UInt16
    public var isIPv6: Bool
    public var isLoopback: Bool
    /// `0.0.0.0` or `[::]`: every address of the machine.
    public var isWildcard: Bool

    /// `127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`, `0.0.0.0:9464`; port 0 lets the
    /// system choose (the server then says which).
    public init?(_ text: String) {
        var host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        if host == "localhost" { host = "127.0.0.1" }
        guard let port = UInt16(portText) else { return nil }
        self.host = String(host)
        self.port = port
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, self.host, &v4) == 1 {
            isIPv6 = false
            isLoopback = UInt32(bigEndian: v4.s_addr) >> 24 == 127
            isWildcard = v4.s_addr == 0
        } else if inet_pton(AF_INET6, self.host, &v6) == 1 {
            isIPv6 = true
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            isLoopback = bytes == Array(repeating: 0, count: 15) + [1]
            isWildcard = bytes == Array(repeating: 0, count: 16)
        } else {
            return nil
        }
    }

    /// The address as a URL's authority: `127.0.0.1:9464`, `[::1]:9464`.
    public var authority: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
