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

/// A bonding sender's links (`srt` with an `srtla://` url): when one joins or leaves, and every
/// 5 s while the sender is there.
public struct SrtlaLinksEvent: NodeEvent, Equatable {
    public static let eventName = "srtla"
    public static let summary = "A bonding sender's links: one joined or left (`change`), or every 5 s their figures."
    public struct Link: Codable, Sendable, Equatable {
        public var address: String
        public var packets: Int
        /// The link's part of the sender's packets since the last report (0 to 1).
        public var share: Double
        /// Seconds since the link was last heard.
        public var lastHeard: Double
        enum CodingKeys: String, CodingKey { case address, packets, share, lastHeard = "last_heard" }
        public init(address: String, packets: Int, share: Double, lastHeard: Double) {
            self.address = address; self.packets = packets; self.share = share; self.lastHeard = lastHeard
        }
    }
    public static var fields: [EventField] {
        [.integer("group"), .string("change", required: false, doc: "joined ADDRESS, left or closed; absent in the periodic report"),
         .list("links", of: EventField.object([.string("address"), .integer("packets"), .number("share", minimum: 0), .number("last_heard", minimum: 0)]))]
    }
    public static var example: Self {
        Self(group: 1, change: "joined 10.0.0.2:40000", links: [Link(address: "10.0.0.2:40000", packets: 1200, share: 0.6, lastHeard: 0.01)])
    }

    public var group: Int
    public var change: String?
    public var links: [Link]
    public init(group: Int, change: String?, links: [Link]) { self.group = group; self.change = change; self.links = links }

    public var text: String {
        let each = links.map { "\($0.address) \($0.packets) packets \(Int(($0.share * 100).rounded())) %" }.joined(separator: ", ")
        return "srtla group \(group)\(change.map { ": " + $0 } ?? ""): \(links.isEmpty ? "no link" : each)"
    }
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
