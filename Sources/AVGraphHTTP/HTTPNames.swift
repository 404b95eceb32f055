/// The names a server answers to in `Host`, and which `Origin` counts as its own.
///
/// Why: a web page whose name an attacker points at 127.0.0.1 (DNS rebinding) reaches a loopback
/// server as a page of its own origin, so it could read the operator's page, its token in it, and
/// then send commands. Such a request carries the attacker's name in `Host`; refusing names the
/// server was not given ends that. An IP literal cannot be rebound, so the address the server is
/// bound to is always its name, and behind a wildcard bind (`0.0.0.0`, `[::]`) every IP literal is.
public struct HTTPNames: Sendable {
    private var names: Set<String>
    private var anyIPLiteral: Bool
    private var anyName: Bool

    /// Loopback names (`localhost`, `127.0.0.0/8`, `::1`), the bound address, and `extra`
    /// (`--http-host`).
    public init(bound: HTTPAddress, extra: [String] = []) {
        names = Set(["localhost", bound.host.lowercased()] + extra.map { Self.canonical($0) })
        anyIPLiteral = bound.isWildcard
        anyName = false
    }

    /// Every name: for a server that is open to the network by the operator's choice anyway
    /// (`--metrics` off loopback), where a rebound name reaches nothing a stranger could not.
    public static let any: HTTPNames = {
        var n = HTTPNames(bound: HTTPAddress("127.0.0.1:0")!)
        n.anyName = true
        return n
    }()

    /// Whether a request with this `Host` value (`name`, `name:port`, `[v6]:port`) is for this server.
    public func answers(host value: String) -> Bool {
        guard let (name, _) = Self.authority(value) else { return false }
        if anyName || names.contains(name) { return true }
        guard let literal = HTTPAddress(name.contains(":") ? "[\(name)]:0" : "\(name):0") else { return false }
        return literal.isLoopback || anyIPLiteral
    }

    /// Whether `origin` (an `Origin` header) is the origin of the request's own `host` as served
    /// over `scheme`: the same scheme, name and port (80 and 443 when not written).
    public static func sameOrigin(_ origin: String, host: String, scheme: String) -> Bool {
        let prefix = scheme + "://"
        guard origin.lowercased().hasPrefix(prefix), let theirs = authority(String(origin.dropFirst(prefix.count))),
              let ours = authority(host) else { return false }
        let standard: UInt16 = scheme == "https" ? 443 : 80
        return theirs.name == ours.name && (theirs.port ?? standard) == (ours.port ?? standard)
    }

    /// A name as `--http-host` takes it: a DNS name or an IP literal, without port or scheme.
    public static func isValidName(_ text: String) -> Bool {
        guard let (name, port) = authority(text), port == nil, !name.isEmpty else { return false }
        if text.hasPrefix("[") || HTTPAddress("\(name):0") != nil { return true }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
    }

    /// `name[:port]` or `[v6][:port]` split, the name lower-cased without a final dot; nil when
    /// the text is neither (a path, a user part, a bad port).
    static func authority(_ text: String) -> (name: String, port: UInt16?)? {
        var name: Substring, rest: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            name = text[text.index(after: text.startIndex)..<close]
            rest = text[text.index(after: close)...]
        } else if let colon = text.firstIndex(of: ":") {
            name = text[..<colon]
            rest = text[colon...]
        } else {
            name = text[...]
            rest = ""
        }
        var port: UInt16?
        if !rest.isEmpty {
            guard rest.first == ":", let p = UInt16(rest.dropFirst()) else { return nil }
            port = p
        }
        guard !name.contains(where: { $0 == "/" || $0 == "@" || $0 == "?" || $0 == "#" || $0 == " " }) else { return nil }
        return (canonical(String(name)), port)
    }

    private static func canonical(_ name: String) -> String {
        let lower = name.lowercased()
        let bare = lower.hasPrefix("[") && lower.hasSuffix("]") ? String(lower.dropFirst().dropLast()) : lower
        return bare.hasSuffix(".") ? String(bare.dropLast()) : bare
    }
}
