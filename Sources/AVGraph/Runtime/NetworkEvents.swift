import Foundation

// Event payloads of the network sources (`rtmp`, `srt` without `in:`) and the `file` sink (its files and their upload).

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

    /// A `file` sink closed a file: the one file of a sink, or one `split` part (`part`, from 1).
    /// `finalized` is false when the file stays as recorded because its clean end failed (it plays
    /// up to its last complete fragment). `seconds` is media time; `frames` counts video pictures.
    public struct Recording: EventPayload {
        public static let eventName = "recording"
        public var path: String
        public var part: Int
        public var seconds: Double
        public var bytes: Int
        public var frames: Int
        public var finalized: Bool
        public init(path: String, part: Int, seconds: Double, bytes: Int, frames: Int, finalized: Bool) {
            self.path = path; self.part = part; self.seconds = seconds; self.bytes = bytes; self.frames = frames; self.finalized = finalized
        }
    }
}
