import Foundation

// Event payloads of the network sources (`rtmp`, `srt` without `in:`) and the `file` sink's upload.

extension Event {
    /// A network source's publisher connected or went (`reason`, and how long and how many packets on `disconnected`).
    public struct Publisher: EventPayload {
        public static let eventName = "publisher"
        public enum State: String, Codable, Sendable { case connected, disconnected }
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
    }

    /// A network source ends the run: no publisher for `seconds`.
    public struct Idle: EventPayload {
        public static let eventName = "idle"
        public var seconds: Double
        public var url: String
        public init(seconds: Double, url: String) { self.seconds = seconds; self.url = url }
    }

    /// A `file` sink sent its finished file: the server answered `status` after `attempts` attempts.
    public struct Uploaded: EventPayload {
        public static let eventName = "uploaded"
        public var path: String
        public var url: String
        public var status: Int
        public var bytes: Int
        public var attempts: Int
        public var seconds: Double
        public init(path: String, url: String, status: Int, bytes: Int, attempts: Int, seconds: Double) {
            self.path = path; self.url = url; self.status = status; self.bytes = bytes; self.attempts = attempts; self.seconds = seconds
        }
    }
}
