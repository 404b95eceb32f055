import AVGraph

// Events of the network sources (`rtmp`, `srt` without `in:`, `publisher`).

/// A publisher connected or went (`reason`, and how long and how many packets on `disconnected`).
public struct PublisherEvent: NodeEvent, Equatable {
    public static let eventName = "publisher"
    public enum State: String, Codable, Sendable, CaseIterable { case connected, disconnected }
    public static let summary = "A network source's publisher connected or went."
    public static var fields: [EventField] {
        [.choice("state", State.allCases.map(\.rawValue)), .integer("session"), .string("peer"), .string("url"),
         .string("reason", required: false), .number("seconds", minimum: 0, required: false), .integer("packets", required: false)]
    }
    public static var example: Self {
        Self(state: .disconnected, session: 1, peer: "127.0.0.1:5000", url: "rtmp://h/live/***", reason: "ended", seconds: 8, packets: 600)
    }

    public var state: State
    public var session: Int
    /// The publisher's address (`HOST:PORT` from the accepted connection; pulling: the server, redacted).
    public var peer: String
    /// The source's URL without stream key, credentials or query.
    public var url: String
    public var reason: String?
    public var seconds: Double?
    public var packets: Int?
    public init(state: State, session: Int, peer: String, url: String, reason: String? = nil, seconds: Double? = nil, packets: Int? = nil) {
        self.state = state; self.session = session; self.peer = peer; self.url = url
        self.reason = reason; self.seconds = seconds; self.packets = packets
    }

    public var text: String {
        state == .connected ? "publisher \(peer) connected (session \(session))"
            : "publisher \(peer) gone (session \(session))\(reason.map { ": " + $0 } ?? "")"
    }
}

/// No publisher for `seconds`: the source ends the run.
public struct IdleEvent: NodeEvent, Equatable {
    public static let eventName = "idle"
    public static let summary = "A network source had no publisher for `seconds`: the run ends."
    public static var fields: [EventField] { [.number("seconds", minimum: 0), .string("url")] }
    public static var example: Self { Self(seconds: 3, url: "rtmp://h/live/***") }

    public var seconds: Double
    public var url: String
    public init(seconds: Double, url: String) { self.seconds = seconds; self.url = url }

    public var text: String { "no publisher on \(url) for \(Event.seconds(seconds)): ending" }
}

/// A network source's publisher was gone for `away`'s `after`: the card is on from `from`
/// (media seconds) (`started`), or off again, its span `from`..`to`, once the publisher's media is back (`ended`).
public struct AwayEvent: NodeEvent, Equatable {
    public static let eventName = "away"
    public enum State: String, Codable, Sendable, CaseIterable { case started, ended }
    public static let summary = "A network source shows its away card while the publisher is gone: started, or ended with its span."
    public static var fields: [EventField] {
        [.choice("state", State.allCases.map(\.rawValue)), .number("from", minimum: 0, doc: "media seconds of the first card"),
         .number("to", minimum: 0, required: false, doc: "on ended: media seconds where the last card ends"), .string("url")]
    }
    public static var example: Self { Self(state: .ended, from: 11, to: 20.5, url: "rtmp://h/live/***") }

    public var state: State
    public var from: Double
    public var to: Double?
    /// The source's URL without stream key, credentials or query.
    public var url: String
    public init(state: State, from: Double, to: Double? = nil, url: String) {
        self.state = state; self.from = from; self.to = to; self.url = url
    }

    public var text: String {
        state == .started ? "publisher away on \(url): the card shows from \(Event.seconds(from))"
            : "publisher back on \(url): the card showed \(Event.seconds(from))..\(Event.seconds(to ?? from))"
    }
}
