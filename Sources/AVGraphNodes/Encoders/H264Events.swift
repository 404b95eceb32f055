import AVGraph
import Foundation

// The `h264` encoder's events.

/// The encoder's frame latency (capture to packet) over the run, in milliseconds.
public struct LatencyEvent: NodeEvent, Equatable {
    public static let eventName = "latency"
    public static let summary = "An encoder's frame latency over the run (ms)."
    public static var fields: [EventField] { [.integer("count"), .number("p50_ms"), .number("p99_ms"), .number("max_ms")] }
    public static var example: Self { Self(count: 900, p50: 12, p99: 31, max: 40) }

    public var count: Int
    public var p50: Double
    public var p99: Double
    public var max: Double
    enum CodingKeys: String, CodingKey { case count, p50 = "p50_ms", p99 = "p99_ms", max = "max_ms" }
    public init(count: Int, p50: Double, p99: Double, max: Double) { self.count = count; self.p50 = p50; self.p99 = p99; self.max = max }

    public var text: String { String(format: "latency p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d frames)", p50, p99, max, count) }
}

/// `passthrough: auto` at the end of the run: pictures (`h264`) or audio frames (`aac`) sent on
/// as the source's own packets, those encoded, spans of ours spliced in, and the longest a card
/// stayed on after the source's pictures came back (until the source's next keyframe; 0 for `aac`).
public struct PassthroughEvent: NodeEvent, Equatable {
    public static let eventName = "passthrough"
    public static let summary = "passthrough: auto at the end of the run: pictures (h264) or audio frames (aac) sent as the source's own "
        + "packets, those encoded, spans of ours, the longest card overstay (s)."
    public static var fields: [EventField] {
        [.integer("passed"), .integer("encoded"), .integer("spans"), .number("max_overstay", minimum: 0)]
    }
    public static var example: Self { Self(passed: 850, encoded: 50, spans: 3, maxOverstay: 1.8) }

    public var passed: Int
    public var encoded: Int
    public var spans: Int
    public var maxOverstay: Double
    enum CodingKeys: String, CodingKey { case passed, encoded, spans, maxOverstay = "max_overstay" }
    public init(passed: Int, encoded: Int, spans: Int, maxOverstay: Double) {
        self.passed = passed; self.encoded = encoded; self.spans = spans; self.maxOverstay = maxOverstay
    }

    public var text: String {
        String(format: "passthrough: %d sent as the source's packets, %d encoded (%d spans; card overstay at most %.2f s)",
               passed, encoded, spans, maxOverstay)
    }
}

/// `adaptive` moved the bitrate (bit/s) to follow the narrowest uplink of the live sinks it feeds.
public struct BitrateEvent: NodeEvent, Equatable {
    public static let eventName = "bitrate"
    public static let summary = "With adaptive, the encoder moved its bitrate (bit/s) to follow the narrowest uplink of the live sinks it feeds."
    public static var fields: [EventField] { [.integer("from"), .integer("to"), .string("reason")] }
    public static var example: Self { Self(from: 4_000_000, to: 1_200_000, reason: "live: 0.40 s queued") }

    public var from: Int
    public var to: Int
    public var reason: String
    public init(from: Int, to: Int, reason: String) { self.from = from; self.to = to; self.reason = reason }

    public var text: String { "bitrate \(from / 1000)k -> \(to / 1000)k (\(reason))" }
}
