import AVGraph

// Events of the live network sinks (`rtmp`, `srt` with `in:`).

/// The sink dropped media it could not send in time (totals so far).
public struct DroppedEvent: NodeEvent, Equatable {
    public static let eventName = "dropped"
    public static let summary = "A network sink dropped media it could not send in time (totals)."
    public static var fields: [EventField] { [.integer("video"), .integer("audio")] }
    public static var example: Self { Self(video: 12, audio: 0) }

    public var video: Int
    public var audio: Int
    public init(video: Int, audio: Int) { self.video = video; self.audio = audio }

    public var text: String { "dropped \(video) video and \(audio) audio packets so far" }
}

/// The sink lost `url` and tries again after `delay` seconds (attempt `attempt` of `of`).
public struct ReconnectingEvent: NodeEvent, Equatable {
    public static let eventName = "reconnecting"
    public static let summary = "A network sink tries again after delay seconds."
    public static var fields: [EventField] { [.string("url"), .integer("attempt"), .integer("of"), .number("delay")] }
    public static var example: Self { Self(url: "rtmp://h/live/***", attempt: 1, of: 5, delay: 0.5) }

    public var url: String
    public var attempt: Int
    public var of: Int
    public var delay: Double
    public init(url: String, attempt: Int, of: Int, delay: Double) { self.url = url; self.attempt = attempt; self.of = of; self.delay = delay }

    public var text: String { "reconnecting to \(url) in \(Event.seconds(delay)) (attempt \(attempt) of \(of))" }
}

/// The sink reached `url` again after `after` seconds and `attempts` attempts.
public struct ReconnectedEvent: NodeEvent, Equatable {
    public static let eventName = "reconnected"
    public static let summary = "A network sink reached its server again."
    public static var fields: [EventField] { [.string("url"), .integer("attempts"), .number("after")] }
    public static var example: Self { Self(url: "rtmp://h/live/***", attempts: 2, after: 1.5) }

    public var url: String
    public var attempts: Int
    public var after: Double
    public init(url: String, attempts: Int, after: Double) { self.url = url; self.attempts = attempts; self.after = after }

    public var text: String { "reconnected to \(url) after \(Event.seconds(after))" }
}

/// The sink's connection to `url` broke.
public struct DisconnectedEvent: NodeEvent, Equatable {
    public static let eventName = "disconnected"
    public static let summary = "A network sink's connection broke."
    public static var fields: [EventField] { [.string("url"), .string("reason")] }
    public static var example: Self { Self(url: "rtmp://h/live/***", reason: "EOF") }

    public var url: String
    public var reason: String
    public init(url: String, reason: String) { self.url = url; self.reason = reason }

    public var text: String { "lost \(url): \(reason)" }
}
