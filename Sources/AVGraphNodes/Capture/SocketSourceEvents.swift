import AVGraph

/// A source listens at `path` (a `socket` source's socket; a network source's URL without its key).
public struct ListeningEvent: NodeEvent, Equatable {
    public static let eventName = "listening"
    public static let summary = "A source listens at path: a socket source's socket, or a listening network source's URL."
    public static var fields: [EventField] { [.string("path")] }
    public static var example: Self { Self(path: "/run/user/1000/avgraph/phone.sock") }

    public var path: String
    public init(path: String) { self.path = path }

    public var text: String { "listening on \(path)" }
}

/// A `socket` source's producer connected, disconnected or ended its broadcast.
public struct ProducerEvent: NodeEvent, Equatable {
    public static let eventName = "producer"
    public enum State: String, Codable, Sendable, CaseIterable { case connected, disconnected, ended }
    public static let summary = "A socket source's producer connected, disconnected or ended."
    public static var fields: [EventField] {
        [.choice("state", State.allCases.map(\.rawValue)), .integer("session"), .integer("messages", required: false), .string("message")]
    }
    public static var example: Self { Self(state: .disconnected, session: 1, messages: 4, message: "producer gone") }

    public var state: State
    public var session: Int
    /// Messages received in the session (on `disconnected`).
    public var messages: Int?
    public var message: String
    public init(state: State, session: Int, messages: Int? = nil, message: String) {
        self.state = state; self.session = session; self.messages = messages; self.message = message
    }

    public var text: String { "\(message) (session \(session))" }
}
