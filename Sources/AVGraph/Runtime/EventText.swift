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
        case .stats, .level: .debug
        case .start, .control, .paused, .resumed, .stopping, .eos, .applied, .latency, .passthrough, .listening, .producer,
             .dropped, .reconnecting, .reconnected, .bitrate, .disconnected, .null, .publisher, .idle, .uploaded, .recording, .custom: .info
        }
    }

    /// The event as a person reads it, without the node (the reader prefixes that).
    public var text: String {
        func s(_ x: Double) -> String { String(format: "%.2f s", x) }
        switch kind {
        case .start(let p): return "running \(p.pipeline) (\(p.realtime ? "realtime" : "offline"), \(p.nodes) nodes\(p.duration.map { ", " + s($0) } ?? ""))"
        case .control(let p): return "control socket \(p.socket)"
        case .stats(let p): return "media \(s(p.mediaTime)), \(p.dropped) dropped, rss \(p.rss >> 20) MB, queued \(p.queuedBytes >> 10) KB"
        case .paused(let p): return "paused at \(s(p.mediaTime))"
        case .resumed(let p): return "resumed after \(s(p.pausedFor))"
        case .stopping(let p): return "stopping (\(p.reason)): flushing encoders and finalizing files"
        case .warning(let p): return p.message
        case .error(let p): return p.message
        case .eos(let p): return "ended (\(p.reason)) at \(s(p.mediaTime))"
        case .applied(let p): return "\(p.option) = \(p.value.text) from \(s(p.mediaTime))"
        case .level(let p): return "level at \(s(p.mediaTime)): rms \(p.rms.map { String(format: "%.1f", $0) }.joined(separator: "/")) dBFS"
        case .latency(let p): return String(format: "latency p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d frames)", p.p50, p.p99, p.max, p.count)
        case .passthrough(let p):
            return String(format: "passthrough: %d pictures sent as the source's, %d encoded (%d spans; card overstay at most %.2f s)",
                          p.passed, p.encoded, p.spans, p.maxOverstay)
        case .listening(let p): return "listening on \(p.path)"
        case .producer(let p): return "\(p.message) (session \(p.session))"
        case .dropped(let p): return "dropped \(p.video) video and \(p.audio) audio packets so far"
        case .reconnecting(let p): return "reconnecting to \(p.url) in \(s(p.delay)) (attempt \(p.attempt) of \(p.of))"
        case .reconnected(let p): return "reconnected to \(p.url) after \(s(p.after))"
        case .bitrate(let p): return "bitrate \(p.from / 1000)k -> \(p.to / 1000)k (\(p.reason))"
        case .disconnected(let p): return "lost \(p.url): \(p.reason)"
        case .null(let p): return zip(p.inputs, p.counts).map { "\($0): \($1)" }.joined(separator: ", ")
        case .publisher(let p):
            return p.state == .connected ? "publisher \(p.peer) connected (session \(p.session))"
                : "publisher \(p.peer) gone (session \(p.session))\(p.reason.map { ": " + $0 } ?? "")"
        case .idle(let p): return "no publisher on \(p.url) for \(s(p.seconds)): ending"
        case .recording(let p):
            return "\(p.finalized ? "finalized" : "left as recorded:") \(p.path) (part \(p.part)): \(s(p.seconds)), \(p.frames) frames, \(p.bytes) bytes"
        case .uploaded(let p): return "uploaded \(p.path) to \(p.url): HTTP \(p.status), \(p.bytes) bytes, attempt \(p.attempts)"
        case .custom(let p):
            let values = p.values.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.text)" }.joined(separator: " ")
            return "\(p.name)\(p.mediaTime.map { " at " + s($0) } ?? "")\(values.isEmpty ? "" : ": " + values)"
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
