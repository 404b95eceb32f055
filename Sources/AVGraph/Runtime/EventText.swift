import Foundation

extension Event {
    /// How much a person watching a run needs this event: stderr shows `warning` and `error` by
    /// default, `info` with `-v`, `debug` with `--log-level debug`.
    public enum Severity: Int, Sendable, Comparable, CaseIterable {
        case error, warning, info, debug
        public static func < (a: Severity, b: Severity) -> Bool { a.rawValue < b.rawValue }
        public var name: String { "\(self)" }
    }

    public var severity: Severity {
        switch kind {
        case .error: .error
        case .warning: .warning
        case .stats: .debug
        case .start, .control, .page, .paused, .resumed, .stopping, .eos, .applied, .custom: .info
        case .node(let p): type(of: p).severity
        case .undeclared: .info
        }
    }

    /// Seconds as event texts write them: `1.50 s`.
    public static func seconds(_ x: Double) -> String { String(format: "%.2f s", x) }

    /// The event as a person reads it, without the node (the reader prefixes that).
    public var text: String {
        let s = Self.seconds
        switch kind {
        case .start(let p): return "running \(p.pipeline) (\(p.realtime ? "realtime" : "offline"), \(p.nodes) nodes\(p.duration.map { ", " + s($0) } ?? ""))"
        case .control(let p): return "control socket \(p.socket)"
        case .page(let p): return "operator page \(p.url)"
        case .stats(let p): return "media \(s(p.mediaTime)), \(p.dropped) dropped, rss \(p.rss >> 20) MB, queued \(p.queuedBytes >> 10) KB"
        case .paused(let p): return "paused at \(s(p.mediaTime))"
        case .resumed(let p): return "resumed after \(s(p.pausedFor))"
        case .stopping(let p): return "stopping (\(p.reason)): flushing encoders and finalizing files"
        case .warning(let p): return p.message
        case .error(let p): return p.message
        case .eos(let p): return "ended (\(p.reason)) at \(s(p.mediaTime))"
        case .applied(let p): return "\(p.option) = \(p.value.text) from \(s(p.mediaTime))"
        case .custom(let p):
            let values = p.values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.text)" }.joined(separator: " ")
            return "\(p.name)\(p.mediaTime.map { " at " + s($0) } ?? "")\(values.isEmpty ? "" : ": " + values)"
        case .node(let p): return p.text
        case .undeclared(let p): return "\(p.name): " + p.fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.text)" }.joined(separator: " ")
        }
    }
}

extension EventValue {
    /// The value as a person reads it: JSON without quotes around plain strings.
    public var text: String {
        switch self {
        case .bool(let b): "\(b)"
        case .int(let i): "\(i)"
        case .number(let d): "\(d)"
        case .string(let s): s
        case .list(let l): "[" + l.map(\.text).joined(separator: ", ") + "]"
        case .object(let o): "{" + o.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.text)" }.joined(separator: ", ") + "}"
        }
    }
}
