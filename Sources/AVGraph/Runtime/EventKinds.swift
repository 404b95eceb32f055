import Foundation

// The payload of each event kind: the fields its JSON line carries besides `event`, `wall` and
// `node`. See the top of Events.swift for adding one; docs/EVENTS.md says what each means.

extension Event {
    /// The run began.
    public struct Start: EventPayload {
        public static let eventName = "start"
        public var pipeline: String
        public var realtime: Bool
        public var nodes: Int
        /// The pipeline's `duration` in seconds, if it has one.
        public var duration: Double?
        public init(pipeline: String, realtime: Bool, nodes: Int, duration: Double?) {
            self.pipeline = pipeline; self.realtime = realtime; self.nodes = nodes; self.duration = duration
        }
        public func encode(to encoder: any Swift.Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(pipeline, forKey: .pipeline)
            try c.encode(realtime, forKey: .realtime)
            try c.encode(nodes, forKey: .nodes)
            try c.encode(duration, forKey: .duration) // null when the run has no duration
        }
    }

    /// The control socket is open at `socket`.
    public struct Control: EventPayload {
        public static let eventName = "control"
        public var socket: String
        public init(socket: String) { self.socket = socket }
    }

    /// The operator page (`run --http`) serves at `url`: what a program that started the run
    /// (`avgraph serve`'s index) links to, read from the events rather than from stderr's prose.
    public struct Page: EventPayload {
        public static let eventName = "page"
        /// `http(s)://HOST:PORT/`, without the token a page off loopback asks for.
        public var url: String
        public init(url: String) { self.url = url }
    }

    /// Video and audio counts.
    public struct KindCounts: Codable, Sendable, Equatable {
        public var video: Int
        public var audio: Int
        public init(video: Int, audio: Int) { self.video = video; self.audio = audio }
    }

    /// Every stats interval (`run --stats-interval`, 1 s by default): per node queues, emitted counts and drops; memory.
    public struct Stats: EventPayload {
        public static let eventName = "stats"
        public struct NodeStats: Codable, Sendable {
            public var node: String
            /// Buffers waiting in each input lane.
            public var queue: [Int]
            public var dropped: Int
            public var droppedByKind: KindCounts?
            /// Per output: buffers and bytes emitted, media time (s) of the last one.
            public var emitted: [Int]?
            public var bytes: [Int]?
            public var time: [Double]?
            /// What the node reported of itself (`Outlet.report(state:)`): a live sink's connection state.
            public var state: String?
            /// Figures the node reports of itself (`Outlet.report`): h264 passthrough's `passed_through`
            /// and `encoded`, a live sink's `reconnects`... (nil: none).
            public var figures: [String: Double]?
            enum CodingKeys: String, CodingKey { case node, queue, dropped, droppedByKind = "dropped_by_kind", emitted, bytes, time, state, figures }
            public init(node: String, queue: [Int], dropped: Int, droppedByKind: KindCounts? = nil,
                        emitted: [Int]? = nil, bytes: [Int]? = nil, time: [Double]? = nil) {
                self.node = node; self.queue = queue; self.dropped = dropped; self.droppedByKind = droppedByKind
                self.emitted = emitted; self.bytes = bytes; self.time = time
            }
        }
        public var nodes: [NodeStats]
        /// The furthest media time (s) any non-source node has emitted.
        public var mediaTime: Double
        public var dropped: Int
        public var droppedByKind: KindCounts
        public var rss: Int
        public var queuedBytes: Int
        enum CodingKeys: String, CodingKey {
            case nodes, mediaTime = "media_time", dropped, droppedByKind = "dropped_by_kind", rss, queuedBytes = "queued_bytes"
        }
        public init(nodes: [NodeStats], mediaTime: Double, dropped: Int, droppedByKind: KindCounts, rss: Int, queuedBytes: Int) {
            self.nodes = nodes; self.mediaTime = mediaTime; self.dropped = dropped; self.droppedByKind = droppedByKind
            self.rss = rss; self.queuedBytes = queuedBytes
        }
    }

    /// `ctl pause`: sources' media from `media_time` on is discarded.
    public struct Paused: EventPayload {
        public static let eventName = "paused"
        public var mediaTime: Double
        enum CodingKeys: String, CodingKey { case mediaTime = "media_time" }
        public init(mediaTime: Double) { self.mediaTime = mediaTime }
    }

    /// `ctl resume`: the span paused at `media_time` for `paused_for` seconds is cut out.
    public struct Resumed: EventPayload {
        public static let eventName = "resumed"
        public var pausedFor: Double
        public var mediaTime: Double
        enum CodingKeys: String, CodingKey { case pausedFor = "paused_for", mediaTime = "media_time" }
        public init(pausedFor: Double, mediaTime: Double) { self.pausedFor = pausedFor; self.mediaTime = mediaTime }
    }

    /// The run was asked to stop (a signal, `ctl stop`, an error): sources end, the rest drains.
    public struct Stopping: EventPayload {
        public static let eventName = "stopping"
        public var reason: String
        public init(reason: String) { self.reason = reason }
    }

    /// Something the user should know; the run goes on.
    public struct Warning: EventPayload {
        public static let eventName = "warning"
        public var message: String
        public init(_ message: String) { self.message = message }
    }

    /// A failure; the run stops (`node` says whose, when a node's).
    public struct ErrorMessage: EventPayload {
        public static let eventName = "error"
        public var message: String
        public init(_ message: String) { self.message = message }
    }

    /// What one sink wrote, for `eos` and the exit line.
    public struct SinkSummary: Codable, Sendable {
        public var node: String
        public var bytes: Int
        /// Seconds of media received (the span from the first to the end of the last buffer).
        public var mediaDuration: Double
        /// Video frames (packets of encoded video, or raw pictures) received.
        public var frames: Int
        enum CodingKeys: String, CodingKey { case node, bytes, mediaDuration = "media_duration", frames }
        public init(node: String, bytes: Int, mediaDuration: Double, frames: Int) {
            self.node = node; self.bytes = bytes; self.mediaDuration = mediaDuration; self.frames = frames
        }
    }

    /// The run ended: every sink finalized. The last event of a run.
    public struct EndOfStream: EventPayload {
        public static let eventName = "eos"
        public var mediaTime: Double
        public var peakRSS: Int
        /// Why it ended: `end` (sources finished or `duration` reached), `SIGINT`, `error`, or a `ctl stop --reason`.
        public var reason: String
        public var sinks: [SinkSummary]
        /// Where the run's CPU went: the process, and each node's own thread.
        public var cpu: CPU?
        /// Each node's own figures at the end (`Outlet.report`), by node; nil when no node reports any.
        public var figures: [String: [String: Double]]?
        enum CodingKeys: String, CodingKey { case mediaTime = "media_time", peakRSS = "peak_rss", reason, sinks, cpu, figures }
        public init(mediaTime: Double, peakRSS: Int, reason: String, sinks: [SinkSummary], cpu: CPU? = nil,
                    figures: [String: [String: Double]]? = nil) {
            self.mediaTime = mediaTime; self.peakRSS = peakRSS; self.reason = reason; self.sinks = sinks; self.cpu = cpu
            self.figures = figures
        }

        /// CPU seconds (user + system). A node's thread leaves out the threads it starts itself
        /// (an encoder's frame threads, scaler slices): those count only in `process`.
        public struct CPU: Codable, Sendable {
            public var process: Double
            public var nodes: [NodeCPU]
        }
        public struct NodeCPU: Codable, Sendable {
            public var node: String
            public var seconds: Double
            /// The node whose thread ran this one (it shares its producers' thread): its seconds are counted there.
            public var thread: String?
            public init(node: String, seconds: Double, thread: String? = nil) {
                self.node = node
                self.seconds = seconds
                self.thread = thread
            }
        }
    }

    /// A live option change took effect at `media_time`; `value` in the option's own type.
    public struct Applied: EventPayload {
        public static let eventName = "applied"
        public var option: String
        public var value: EventValue
        public var mediaTime: Double
        enum CodingKeys: String, CodingKey { case option, value, mediaTime = "media_time" }
        public init(option: String, value: EventValue, mediaTime: Double) { self.option = option; self.value = value; self.mediaTime = mediaTime }
    }

    /// A node's own event, for plugins (and nodes) whose events the runtime does not know:
    /// a lower-case `name`, an optional media time, and flat scalar values.
    public struct Custom: EventPayload {
        public static let eventName = "custom"
        public var name: String
        public var mediaTime: Double?
        public var values: [String: EventValue]
        enum CodingKeys: String, CodingKey { case name, mediaTime = "media_time", values }
        public init(_ name: String, mediaTime: Double? = nil, _ values: [String: EventValue] = [:]) {
            self.name = name; self.mediaTime = mediaTime; self.values = values
        }
    }
}

/// A JSON value in its own type: an option's value in `applied`, a custom event's values.
public enum EventValue: Codable, Sendable, Equatable {
    case bool(Bool)
    case int(Int)
    case number(Double)
    case string(String)
    case list([EventValue])
    case object([String: EventValue])

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let l = try? c.decode([EventValue].self) { self = .list(l) }
        else { self = .object(try c.decode([String: EventValue].self)) }
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .number(let d): try c.encode(d.isFinite ? d : 0)
        case .string(let s): try c.encode(s)
        case .list(let l): try c.encode(l)
        case .object(let o): try c.encode(o)
        }
    }

    /// The value as Foundation JSON (`Bool`, `Int`, `Double`, `String`, arrays, dictionaries).
    public var any: Any {
        switch self {
        case .bool(let b): b
        case .int(let i): i
        case .number(let d): d
        case .string(let s): s
        case .list(let l): l.map(\.any)
        case .object(let o): o.mapValues(\.any)
        }
    }
}
