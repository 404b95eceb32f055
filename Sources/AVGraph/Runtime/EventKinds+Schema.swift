// How docs/events.schema.json describes the runtime's own kinds, and an example of each.
// (A node's kinds describe themselves where the node declares them.)

extension Event.Start {
    public static let summary = "The run began."
    public static var fields: [EventField] {
        [.string("pipeline"), .boolean("realtime"), .integer("nodes"),
         EventField("duration", ["type": ["number", "null"]], doc: "the pipeline's duration in seconds, null when it has none")]
    }
    public static var node: EventField.Presence { .absent }
    public static var example: Self { Self(pipeline: "live", realtime: true, nodes: 9, duration: nil) }
}

extension Event.Control {
    public static let summary = "The control socket is open."
    public static var fields: [EventField] { [.string("socket")] }
    public static var node: EventField.Presence { .absent }
    public static var example: Self { Self(socket: "/run/user/1000/avgraph/live.sock") }
}

extension Event.Page {
    public static let summary = "The operator page (run --http) is serving at url (without its token)."
    public static var fields: [EventField] { [.string("url")] }
    public static var node: EventField.Presence { .absent }
    public static var example: Self { Self(url: "http://127.0.0.1:8090/") }
}

extension Event.Stats {
    public static let summary = "About once a second and once at the end: per node queue depths, emitted counts, bytes, drops; memory."
    public static var fields: [EventField] {
        let count = EventField.integer()
        return [
            .list("nodes", of: EventField.object([
                .string("node"), .list("queue", of: count), .integer("dropped"),
                EventField("dropped_by_kind", ["$ref": "#/$defs/kind_counts"], required: false),
                .list("emitted", of: count, required: false), .list("bytes", of: count, required: false),
                .list("time", of: EventField.number(), required: false),
                .string("state", required: false, doc: "a live sink's connection: connecting, sending, reconnecting, failed, ended"),
                EventField("figures", Self.figuresSchema, required: false,
                           doc: "what the node reports of itself: h264/aac passthrough's passed_through and encoded, a live sink's reconnects..."),
            ])),
            .number("media_time"), .integer("dropped"), EventField("dropped_by_kind", ["$ref": "#/$defs/kind_counts"]),
            .integer("rss"), .integer("queued_bytes"),
        ]
    }
    /// A node's own figures: names to numbers.
    static let figuresSchema: JSONValue = ["type": "object", "additionalProperties": ["type": "number"]]
    public static var node: EventField.Presence { .absent }
    public static var example: Self {
        Self(nodes: [.init(node: "video", queue: [1], dropped: 2, droppedByKind: .init(video: 2, audio: 0), emitted: [3], bytes: [4], time: [0.5])],
             mediaTime: 0.5, dropped: 2, droppedByKind: .init(video: 2, audio: 0), rss: 52_428_800, queuedBytes: 0)
    }
}

extension Event.Paused {
    public static let summary = "ctl pause: sources' media from media_time on is discarded."
    public static var fields: [EventField] { [.number("media_time")] }
    public static var node: EventField.Presence { .absent }
    public static var example: Self { Self(mediaTime: 12.5) }
}

extension Event.Resumed {
    public static let summary = "ctl resume: the paused span is cut out of the output."
    public static var fields: [EventField] { [.number("paused_for"), .number("media_time")] }
    public static var node: EventField.Presence { .absent }
    public static var example: Self { Self(pausedFor: 4, mediaTime: 12.5) }
}

extension Event.Stopping {
    public static let summary = "The run was asked to stop; sources end, everything downstream drains and finalizes."
    public static var fields: [EventField] { [.string("reason")] }
    public static var node: EventField.Presence { .absent }
    public static var example: Self { Self(reason: "SIGINT") }
}

extension Event.Warning {
    public static let summary = "Something the user should know; the run goes on."
    public static var fields: [EventField] { [.string("message")] }
    public static var node: EventField.Presence { .optional }
    public static var example: Self { Self("no producer connected for 5.00 s") }
}

extension Event.ErrorMessage {
    public static let summary = "A failure; the run stops and exits 1."
    public static var fields: [EventField] { [.string("message")] }
    public static var node: EventField.Presence { .optional }
    public static var example: Self { Self("cannot open out.mp4: Permission denied") }
}

extension Event.EndOfStream {
    public static let summary = "The run ended; every sink finalized. The last event."
    public static var fields: [EventField] {
        let seconds = EventField.number(minimum: 0)
        return [
            .number("media_time"), .integer("peak_rss"),
            .string("reason", doc: "end, SIGINT, SIGTERM, error, or a ctl stop reason"),
            .list("sinks", of: EventField.object([.string("node"), .integer("bytes"), .number("media_duration"), .integer("frames")])),
            EventField("cpu", EventField.object([
                EventField("process", seconds),
                .list("nodes", of: EventField.object([.string("node"), EventField("seconds", seconds),
                    .string("thread", required: false, doc: "the node whose thread ran this one (Node.sharesProducerThread): its seconds count there, this node's are 0")])),
            ]), required: false, doc: "CPU seconds (user+system): the whole process, and each node's own thread "
                + "(threads a node starts itself, such as an encoder's, count only in process)"),
            EventField("figures", ["type": "object", "additionalProperties": Event.Stats.figuresSchema], required: false,
                       doc: "each node's own figures at the end, by node name (as in stats): h264 passthrough's passed_through and encoded..."),
        ]
    }
    public static var node: EventField.Presence { .absent }
    public static var example: Self {
        Self(mediaTime: 3, peakRSS: 62_914_560, reason: "end", sinks: [.init(node: "out", bytes: 912_000, mediaDuration: 3, frames: 90)],
             cpu: CPU(process: 1.9, nodes: [NodeCPU(node: "video", seconds: 1.2)]), figures: ["video": ["passed_through": 519, "encoded": 381]])
    }
}

extension Event.Applied {
    public static let summary = "A live option change took effect; value in the option's own type."
    public static var fields: [EventField] { [.string("option"), EventField("value", ["$ref": "#/$defs/value"]), .number("media_time")] }
    public static var node: EventField.Presence { .required }
    public static var example: Self { Self(option: "gain", value: .object(["mic": .number(2)]), mediaTime: 1) }
}

extension Event.Custom {
    public static let summary = "A node's own event that its type does not declare: a lower-case name, an optional media time, flat scalar values."
    public static var fields: [EventField] {
        [EventField("name", ["type": "string", "pattern": "^[a-z][a-z0-9_-]*$"]), .number("media_time", required: false),
         EventField("values", ["type": "object", "additionalProperties": ["type": ["boolean", "number", "string"]]])]
    }
    public static var node: EventField.Presence { .required }
    public static var example: Self { Self("scene", mediaTime: 1, ["cut": .bool(true)]) }
}
