import AVGraph

// Events of the `file` sink: its files, and their upload.

/// A file closed: the one file of a sink, or one `split` part (`part`, from 1). `finalized` is
/// false when the file stays as recorded because its clean end failed (it plays up to its last
/// complete fragment). `seconds` is media time; `frames` counts video pictures.
public struct RecordingEvent: NodeEvent, Equatable {
    public static let eventName = "recording"
    public static let summary = "A file sink closed a file: its one file, or one `split` part."
    public static var fields: [EventField] {
        [.string("path"), .integer("part", minimum: 1), .number("seconds", minimum: 0), .integer("bytes"), .integer("frames"), .boolean("finalized")]
    }
    public static var example: Self { Self(path: "/tmp/a-002.mp4", part: 2, seconds: 10.0, bytes: 1000, frames: 300, finalized: true) }

    public var path: String
    public var part: Int
    public var seconds: Double
    public var bytes: Int
    public var frames: Int
    public var finalized: Bool
    public init(path: String, part: Int, seconds: Double, bytes: Int, frames: Int, finalized: Bool) {
        self.path = path; self.part = part; self.seconds = seconds; self.bytes = bytes; self.frames = frames; self.finalized = finalized
    }

    public var text: String {
        "\(finalized ? "finalized" : "left as recorded:") \(path) (part \(part)): \(Event.seconds(seconds)), \(frames) frames, \(bytes) bytes"
    }
}

/// The sink sent its finished file: the server answered `status` after `attempts` attempts.
public struct UploadedEvent: NodeEvent, Equatable {
    public static let eventName = "uploaded"
    public static let summary = "A file sink's finished file reached the server."
    public static var fields: [EventField] {
        [.string("path"), .string("url"), .integer("status", minimum: 100, maximum: 599), .integer("bytes"),
         .integer("attempts", minimum: 1), .number("seconds", minimum: 0)]
    }
    public static var example: Self { Self(path: "/tmp/a.mp4", url: "https://h/a.mp4?***", status: 201, bytes: 10, attempts: 1, seconds: 0.5) }

    public var path: String
    public var url: String
    public var status: Int
    public var bytes: Int
    public var attempts: Int
    public var seconds: Double
    public init(path: String, url: String, status: Int, bytes: Int, attempts: Int, seconds: Double) {
        self.path = path; self.url = url; self.status = status; self.bytes = bytes; self.attempts = attempts; self.seconds = seconds
    }

    public var text: String { "uploaded \(path) to \(url): HTTP \(status), \(bytes) bytes, attempt \(attempts)" }
}
