import AVGraph
import CSrt
import Foundation

/// What an `srt://HOST:PORT?OPTIONS` URL asks of the `srt` sink's caller socket. The option
/// names and units are libavformat's (FFmpeg 5.1's srt protocol, which opened this socket before
/// and whose URLs users already write): `latency` in microseconds, `connect_timeout` in
/// milliseconds, `linger` in seconds. Parsed whole before anything connects, so a mistyped or
/// unknown option fails `check` instead of being ignored by the socket.
package struct SrtCallerURL: Equatable, Sendable {
    /// One libsrt socket option, in the form `srt_setsockflag` takes.
    package struct Option: Equatable, Sendable {
        package enum Value: Equatable, Sendable {
            case int32(Int32)
            case int64(Int64)
            case string(String)
            /// SRTO_LINGER takes a `struct linger`: seconds, 0 for none.
            case linger(Int32)
        }
        package let name: String
        package let flag: SRT_SOCKOPT
        package let value: Value
    }

    package var host: String
    package var port: Int
    /// Socket options in the order the URL gave them (after the defaults they override).
    package var options: [Option] = []
    /// `timeout` (µs): how long the peer may take nothing, instead of the sink's own `timeout`.
    package var timeout: Double?
    /// `connect_timeout` (ms): how long a call may take, instead of the timeout.
    package var connectTimeout: Double?

    /// The live messages the muxer writes: 7 TS packets, SRT's live payload.
    package static let payload: Int32 = 1316

    private enum Kind {
        case int32(ClosedRange<Int64>, divisor: Int64 = 1)
        case int64(ClosedRange<Int64>)
        case bool
        case string(maxBytes: Int)
        case linger
    }

    /// The options honoured, by libavformat's name: every socket option its srt protocol took in
    /// 5.1 that means something to a live caller.
    private static let table: [String: (SRT_SOCKOPT, Kind)] = [
        "passphrase": (SRTO_PASSPHRASE, .string(maxBytes: 79)),
        "streamid": (SRTO_STREAMID, .string(maxBytes: 512)),
        "pbkeylen": (SRTO_PBKEYLEN, .int32(0...32)),
        "enforced_encryption": (SRTO_ENFORCEDENCRYPTION, .bool),
        "kmrefreshrate": (SRTO_KMREFRESHRATE, .int32(0...Int64(Int32.max))),
        "kmpreannounce": (SRTO_KMPREANNOUNCE, .int32(0...Int64(Int32.max))),
        "latency": (SRTO_LATENCY, .int32(0...Int64(Int32.max) * 1000, divisor: 1000)),
        "tsbpddelay": (SRTO_LATENCY, .int32(0...Int64(Int32.max) * 1000, divisor: 1000)),
        "rcvlatency": (SRTO_RCVLATENCY, .int32(0...Int64(Int32.max) * 1000, divisor: 1000)),
        "peerlatency": (SRTO_PEERLATENCY, .int32(0...Int64(Int32.max) * 1000, divisor: 1000)),
        "maxbw": (SRTO_MAXBW, .int64(-1...Int64.max)),
        "inputbw": (SRTO_INPUTBW, .int64(0...Int64.max)),
        "oheadbw": (SRTO_OHEADBW, .int32(5...100)),
        "mss": (SRTO_MSS, .int32(76...1500)),
        "ffs": (SRTO_FC, .int32(32...Int64(Int32.max))),
        "ipttl": (SRTO_IPTTL, .int32(1...255)),
        "iptos": (SRTO_IPTOS, .int32(0...255)),
        "tlpktdrop": (SRTO_TLPKTDROP, .bool),
        "nakreport": (SRTO_NAKREPORT, .bool),
        "sndbuf": (SRTO_SNDBUF, .int32(1...Int64(Int32.max))),
        "rcvbuf": (SRTO_RCVBUF, .int32(1...Int64(Int32.max))),
        "send_buffer_size": (SRTO_UDP_SNDBUF, .int32(1...Int64(Int32.max))),
        "recv_buffer_size": (SRTO_UDP_RCVBUF, .int32(1...Int64(Int32.max))),
        "lossmaxttl": (SRTO_LOSSMAXTTL, .int32(0...Int64(Int32.max))),
        "minversion": (SRTO_MINVERSION, .int32(0...Int64(Int32.max))),
        // The messages stay 1316 bytes; a larger payload only allows them.
        "payload_size": (SRTO_PAYLOADSIZE, .int32(Int64(payload)...1456)),
        "pkt_size": (SRTO_PAYLOADSIZE, .int32(Int64(payload)...1456)),
        "linger": (SRTO_LINGER, .linger),
    ]

    /// Options that are no socket option: what the sink does (it calls, in live mode) or how long it waits.
    private static let fixed: [String: Set<String>] = ["mode": ["caller"], "transtype": ["live"], "smoother": ["live"], "congestion": ["live"]]

    /// Every name the URL may carry, for the error that names an unknown one.
    package static var honoured: [String] { (Array(table.keys) + Array(fixed.keys) + ["timeout", "connect_timeout"]).sorted() }

    /// Parses `url`; `defaults` are options the sink sets itself (the URL's own win), written as in the URL.
    package init(_ url: String, defaults: [String: String] = [:]) throws {
        guard url.lowercased().hasPrefix("srt://") else { throw MediaError("'\(Redaction.url(url))' is not an srt:// URL") }
        let rest = url.dropFirst("srt://".count)
        let query = rest.firstIndex(of: "?").map { rest[rest.index(after: $0)...] } ?? ""
        var authority = rest.prefix { $0 != "?" }
        // A path means nothing to SRT; only a bare trailing slash is taken.
        if authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.contains("/") && !authority.contains("@") else {
            throw MediaError("'\(Redaction.url(url))': an SRT address is srt://HOST:PORT, with no path or user")
        }
        guard let colon = authority.lastIndex(of: ":"), let port = Int(authority[authority.index(after: colon)...]), (1...65535).contains(port) else {
            throw MediaError("'\(Redaction.url(url))' needs a port: srt://HOST:PORT")
        }
        var host = String(authority[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw MediaError("'\(Redaction.url(url))' needs a host: srt://HOST:PORT") }
        self.host = host
        self.port = port

        var pairs = defaults.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        // Split at `&` only: an access-control stream id (`#!::r=live/k,m=publish`) keeps its `#`, `=` and `,`.
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(kv[0])
            let raw = kv.count > 1 ? String(kv[1]) : ""
            pairs.append((name, raw.removingPercentEncoding ?? raw))
        }
        var byFlag: [Int: Int] = [:]
        for (name, value) in pairs {
            if let option = try parse(name, value) {
                // A later value of the same socket option replaces the earlier (the URL's its default).
                let key = Int(option.flag.rawValue)
                if let at = byFlag[key] { options[at] = option } else {
                    byFlag[key] = options.count
                    options.append(option)
                }
            }
        }
    }

    /// One option: a socket option, or nil for the timeouts and the fixed values (kept apart).
    private mutating func parse(_ name: String, _ value: String) throws -> Option? {
        // The value is left out of errors about strings: a passphrase or stream id is a secret.
        func bad(_ why: String) -> MediaError { MediaError("SRT option '\(name)': \(why)") }
        func integer() throws -> Int64 {
            guard let n = Int64(value.trimmingCharacters(in: .whitespaces)) else { throw bad("'\(value)' is not a whole number") }
            return n
        }
        if let allowed = Self.fixed[name] {
            guard allowed.contains(value) else {
                throw bad("the srt sink calls a listener in live mode: only \(allowed.sorted().map { "\(name)=\($0)" }.joined(separator: ", "))")
            }
            return nil
        }
        switch name {
        case "timeout":
            let us = try integer()
            guard us > 0 else { throw bad("must be more than 0 (microseconds)") }
            timeout = Double(us) / 1e6
            return nil
        case "connect_timeout":
            let ms = try integer()
            guard ms > 0 else { throw bad("must be more than 0 (milliseconds)") }
            connectTimeout = Double(ms) / 1e3
            return nil
        default: break
        }
        guard let (flag, kind) = Self.table[name] else {
            throw MediaError("unknown SRT option '\(name)' (the srt sink takes \(Self.honoured.joined(separator: ", ")))")
        }
        switch kind {
        case .int32(let range, let divisor):
            let n = try integer()
            guard range.contains(n) else { throw bad("\(n) is outside \(range.lowerBound)...\(range.upperBound)") }
            if name == "pbkeylen" && ![0, 16, 24, 32].contains(n) { throw bad("the key length is 16, 24 or 32 (bytes)") }
            return Option(name: name, flag: flag, value: .int32(Int32(n / divisor)))
        case .int64(let range):
            let n = try integer()
            guard range.contains(n) else { throw bad("\(n) is below \(range.lowerBound)") }
            return Option(name: name, flag: flag, value: .int64(n))
        case .bool:
            switch value.lowercased() {
            case "1", "true", "yes", "on": return Option(name: name, flag: flag, value: .int32(1))
            case "0", "false", "no", "off": return Option(name: name, flag: flag, value: .int32(0))
            default: throw bad("'\(value)' is not 0 or 1")
            }
        case .string(let maxBytes):
            let bytes = value.utf8.count
            if name == "passphrase" && bytes != 0 && !(10...maxBytes).contains(bytes) {
                throw bad("a passphrase has 10 to \(maxBytes) characters (this one \(bytes))")
            }
            guard bytes <= maxBytes else { throw bad("at most \(maxBytes) bytes (this one \(bytes))") }
            return Option(name: name, flag: flag, value: .string(value))
        case .linger:
            let n = try integer()
            guard (0...Int64(Int32.max)).contains(n) else { throw bad("\(n) is not a number of seconds") }
            return Option(name: name, flag: flag, value: .linger(Int32(n)))
        }
    }
}
