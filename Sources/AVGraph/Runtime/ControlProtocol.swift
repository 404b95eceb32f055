import Foundation

// The control protocol as types: one request type per command and one reply body per answer,
// shared by the socket (ControlServer, `PipelineRun.answer(controlLine:)`), `avgraph ctl`, nodes
// that answer commands (`AnswersControl`), the Swift API and the tests. docs/control.schema.json
// describes the lines and docs/CONTROL.md lists them; ControlSchemaTests holds all three together.
//
// Adding a command: a case in `ControlRequest` (its name in `builtIn`, its fields in the decoder
// and encoder below), its answer in ControlCommands.swift, a `$defs` entry and if/then line in
// docs/control.schema.json, a row in docs/CONTROL.md and a sample in ControlSchemaTests.
// A node type answers commands of its own through `AnswersControl` instead.

/// Why a request line is refused before anything is asked of the run.
public struct ControlRefusal: Error, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// A control request: `cmd` and the command's own fields.
public enum ControlRequest: Sendable, Equatable {
    case set(SetOption)
    case get(OptionName)
    case pause
    case resume
    case stop(reason: String?)
    case stats
    case watch
    case graph
    /// A command the run does not know itself: answered by the node that declares it (`clip`),
    /// which reads `fields` (every key but `cmd` and `id`) as its own request type.
    case node(command: String, fields: [String: EventValue])

    /// The commands the run answers itself.
    public static let builtIn = ["set", "get", "pause", "resume", "stop", "stats", "watch", "graph"]

    public struct OptionName: Codable, Sendable, Equatable {
        public var node: String
        public var option: String
        public init(node: String, option: String) {
            self.node = node
            self.option = option
        }
    }

    public struct SetOption: Sendable, Equatable {
        public var target: OptionName
        /// As written in a `.pipe` file (`600k`, `{mic: true}`), or a JSON number, boolean, list or object.
        public var value: EventValue
        /// Media seconds from which the change applies; nil: the next frame or block.
        public var at: Double?
        public init(node: String, option: String, value: EventValue, at: Double? = nil) {
            target = OptionName(node: node, option: option)
            self.value = value
            self.at = at
        }
    }

    public var command: String {
        switch self {
        case .set: "set"
        case .get: "get"
        case .pause: "pause"
        case .resume: "resume"
        case .stop: "stop"
        case .stats: "stats"
        case .watch: "watch"
        case .graph: "graph"
        case .node(let command, _): command
        }
    }
}

/// One request line as sent: the request and the client's `id`, which the reply echoes.
public struct ControlEnvelope: Sendable, Codable {
    public var request: ControlRequest
    public var id: EventValue?

    public init(_ request: ControlRequest, id: EventValue? = nil) {
        self.request = request
        self.id = id
    }

    enum Key: String, CodingKey { case cmd, id, node, option, value, at, reason }

    /// A line as the socket reads it; a refusal says what is wrong in the words a client is sent.
    public static func decode(line: Data) -> Result<ControlEnvelope, ControlRefusal> {
        do { return .success(try JSONDecoder().decode(ControlEnvelope.self, from: line)) } catch let refusal as ControlRefusal {
            return .failure(refusal)
        } catch {
            return .failure(ControlRefusal("malformed request: expected one JSON object a line, like {\"cmd\": \"stats\"}"))
        }
    }

    /// Just the `id` of a line, for the refusal of a request that does not decode.
    public static func id(of line: Data) -> EventValue? {
        struct OnlyID: Decodable { var id: EventValue? }
        return (try? JSONDecoder().decode(OnlyID.self, from: line))?.id
    }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        id = try? c.decodeIfPresent(EventValue.self, forKey: .id)
        guard let cmd = try? c.decode(String.self, forKey: .cmd) else { throw ControlRefusal("missing \"cmd\"") }
        func text(_ key: Key) throws -> String {
            guard let s = try? c.decode(String.self, forKey: key) else { throw ControlRefusal("missing \"\(key.rawValue)\"") }
            return s
        }
        switch cmd {
        case "set":
            let name = ControlRequest.OptionName(node: try text(.node), option: try text(.option))
            guard let value = try? c.decode(EventValue.self, forKey: .value) else { throw ControlRefusal("missing \"value\"") }
            var at: Double?
            if c.contains(.at) {
                let raw = try? c.decode(EventValue.self, forKey: .at)
                guard let seconds = raw.flatMap(Self.mediaTime) else {
                    throw ControlRefusal("\"at\" must be a media time in seconds (a number, or like \"12.5s\")")
                }
                at = seconds
            }
            request = .set(.init(node: name.node, option: name.option, value: value, at: at))
        case "get": request = .get(.init(node: try text(.node), option: try text(.option)))
        case "pause": request = .pause
        case "resume": request = .resume
        case "stop": request = .stop(reason: try? c.decodeIfPresent(String.self, forKey: .reason))
        case "stats": request = .stats
        case "watch": request = .watch
        case "graph": request = .graph
        default:
            let all = try decoder.container(keyedBy: AnyKey.self)
            var fields: [String: EventValue] = [:]
            for key in all.allKeys where key.stringValue != "cmd" && key.stringValue != "id" {
                fields[key.stringValue] = try? all.decode(EventValue.self, forKey: key)
            }
            request = .node(command: cmd, fields: fields)
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// A `set`'s `at`: seconds of media time, as a JSON number or a duration string.
    static func mediaTime(_ raw: EventValue) -> Double? {
        let seconds: Double?
        switch raw {
        case .string(let s): seconds = ValueSyntax.duration(s) ?? Double(s)
        case .int(let i): seconds = Double(i)
        case .number(let d): seconds = d
        default: seconds = nil
        }
        guard let seconds, seconds.isFinite, seconds >= 0, seconds <= 1e9 else { return nil }
        return seconds
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(request.command, forKey: .cmd)
        try c.encodeIfPresent(id, forKey: .id)
        switch request {
        case .set(let s):
            try c.encode(s.target.node, forKey: .node)
            try c.encode(s.target.option, forKey: .option)
            try c.encode(s.value, forKey: .value)
            try c.encodeIfPresent(s.at, forKey: .at)
        case .get(let g):
            try c.encode(g.node, forKey: .node)
            try c.encode(g.option, forKey: .option)
        case .stop(let reason): try c.encodeIfPresent(reason, forKey: .reason)
        case .node(_, let fields):
            var all = encoder.container(keyedBy: AnyKey.self)
            for (key, value) in fields where key != "cmd" && key != "id" { try all.encode(value, forKey: AnyKey(stringValue: key)) }
        case .pause, .resume, .stats, .watch, .graph: break
        }
    }

    /// The request as one line (no newline), as `ctl` sends it.
    public var line: Data { (try? ControlJSON.encoder.encode(self)) ?? Data() }
}

/// The fields of a successful reply besides `ok` and `id`.
public protocol ControlReplyBody: Codable, Sendable {}

/// `pause`, `resume`, `stop`: nothing but `ok`.
public struct EmptyReply: ControlReplyBody, Equatable {
    public init() {}
}

/// `set` and `get`: the option and its value as a `.pipe` file writes it (a URL's secrets masked).
public struct OptionReply: ControlReplyBody, Equatable {
    public var node: String
    public var option: String
    public var value: String
    /// A `set` due later: the media time it is due at.
    public var at: Double?
    public init(node: String, option: String, value: String, at: Double? = nil) {
        self.node = node
        self.option = option
        self.value = value
        self.at = at
    }
}

/// `watch`: events follow, one a line.
public struct WatchReply: ControlReplyBody, Equatable {
    public var watching: Bool
    public init() { watching = true }
}

/// `stats`: the `stats` event's figures, the wall clock and whether the run is paused.
public struct StatsReply: ControlReplyBody {
    public var stats: Event.Stats
    public var wall: Double
    public var paused: Bool

    enum Key: String, CodingKey { case wall, paused }

    public init(stats: Event.Stats, wall: Double, paused: Bool) {
        self.stats = stats
        self.wall = wall
        self.paused = paused
    }

    public init(from decoder: any Swift.Decoder) throws {
        stats = try Event.Stats(from: decoder)
        let c = try decoder.container(keyedBy: Key.self)
        wall = try c.decode(Double.self, forKey: .wall)
        paused = try c.decode(Bool.self, forKey: .paused)
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        try stats.encode(to: encoder)
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(wall, forKey: .wall)
        try c.encode(paused, forKey: .paused)
    }
}

extension PipelineGraph: ControlReplyBody {}

/// A reply line: `ok`, the request's `id`, and the body or the `error`.
public struct ControlReply: Sendable, Encodable {
    public var id: EventValue?
    public var outcome: Result<any ControlReplyBody, ControlRefusal>

    public init(_ outcome: Result<any ControlReplyBody, ControlRefusal>, id: EventValue? = nil) {
        self.outcome = outcome
        self.id = id
    }

    public static func refused(_ message: String, id: EventValue? = nil) -> ControlReply { .init(.failure(ControlRefusal(message)), id: id) }

    public var ok: Bool { if case .success = outcome { return true } else { return false } }

    enum Key: String, CodingKey { case ok, error, id }

    public func encode(to encoder: any Swift.Encoder) throws {
        if case .success(let body) = outcome { try body.encode(to: encoder) }
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(ok, forKey: .ok)
        if case .failure(let refusal) = outcome { try c.encode(refusal.message, forKey: .error) }
        try c.encodeIfPresent(id, forKey: .id)
    }

    /// The reply as one line (no newline), keys sorted, `/` unescaped.
    public var line: [UInt8] {
        Array((try? ControlJSON.encoder.encode(self)) ?? Data(#"{"error":"reply could not be encoded","ok":false}"#.utf8))
    }
}

/// A reply line as a client reads it, with the body of the type it asked for.
public struct ControlAnswer<Body: Decodable>: Decodable {
    public var ok: Bool
    public var error: String?
    public var id: EventValue?
    /// Present when `ok`.
    public var body: Body?

    enum Key: String, CodingKey { case ok, error, id }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        ok = try c.decode(Bool.self, forKey: .ok)
        error = try c.decodeIfPresent(String.self, forKey: .error)
        id = try? c.decodeIfPresent(EventValue.self, forKey: .id)
        body = ok ? try Body(from: decoder) : nil
    }

    public static func decode(line: Data) throws -> ControlAnswer<Body> { try JSONDecoder().decode(Self.self, from: line) }
}

enum ControlJSON {
    static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }
}
