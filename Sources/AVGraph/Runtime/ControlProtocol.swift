import Foundation

// The control protocol as types: one request type per command and one reply body per answer,
// shared by the socket (ControlServer, `PipelineRun.answer(controlLine:)`), `avgraph ctl`, nodes
// that answer commands (`AnswersControl`), the Swift API and the tests. docs/control.schema.json
// is generated from these types (ControlSchema.swift) and docs/CONTROL.md lists them;
// ControlSchemaTests holds all three together.
//
// Adding a command: a case in `ControlRequest`, its entry in `ControlRequest.commands` (its fields'
// type and its reply type), its decoding and encoding below, its answer in ControlCommands.swift,
// a row in docs/CONTROL.md and a sample in ControlSchemaTests; then regenerate
// docs/control.schema.json (`avgraph inspect --control-schema`), which is read off those types.
// A node type answers commands of its own through `AnswersControl` instead.

/// Why a request line is refused before anything is asked of the run.
public struct ControlRefusal: Error, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// One command of the protocol: its name, the fields its request carries besides `cmd` and `id`
/// (a `Decodable` type: what `inspect --control-schema` reads the request's schema from) and the
/// type of its reply. The run's own are `ControlRequest.commands`; a node type lists its own in
/// `AnswersControl.controlCommands`.
public struct ControlCommandSpec: Sendable {
    public let name: String
    public let fields: any (Decodable & Sendable).Type
    public let reply: any ControlReplyBody.Type
    public let doc: String

    public init(_ name: String, fields: any (Decodable & Sendable).Type, reply: any ControlReplyBody.Type, doc: String) {
        self.name = name
        self.fields = fields
        self.reply = reply
        self.doc = doc
    }
}

/// A control request: `cmd` and the command's own fields, as one flat JSON object.
public enum ControlRequest: Sendable, Equatable, Codable {
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

    /// The commands the run answers itself, each with its request's fields and its reply.
    public static let commands: [ControlCommandSpec] = [
        .init("set", fields: SetOption.self, reply: OptionReply.self,
              doc: "Change a live option: from the next frame or block, or from media time `at`. `value` as a .pipe file writes it, or a JSON number, boolean, list or object."),
        .init("get", fields: OptionName.self, reply: OptionReply.self, doc: "The current value of an option."),
        .init("pause", fields: NoFields.self, reply: EmptyReply.self, doc: "Pause a realtime run: sources' media is discarded until resume."),
        .init("resume", fields: NoFields.self, reply: EmptyReply.self, doc: "Resume: the paused span is cut out of the output."),
        .init("stop", fields: StopFields.self, reply: EmptyReply.self, doc: "End the run: it drains, flushes and finalizes."),
        .init("stats", fields: NoFields.self, reply: StatsReply.self, doc: "The stats snapshot."),
        .init("watch", fields: NoFields.self, reply: WatchReply.self, doc: "Turn the connection into the event stream (docs/events.schema.json)."),
        .init("graph", fields: NoFields.self, reply: PipelineGraph.self,
              doc: "The graph: nodes with the options the file sets and their live options, edges with live figures."),
    ]

    /// The names of the commands the run answers itself.
    public static var builtIn: [String] { commands.map(\.name) }

    public struct OptionName: Codable, Sendable, Equatable {
        public var node: String
        public var option: String
        public init(node: String, option: String) {
            self.node = node
            self.option = option
        }

        enum CodingKeys: String, CodingKey { case node, option }

        public init(from decoder: any Swift.Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            func text(_ key: CodingKeys) throws -> String {
                guard let s = try? c.decode(String.self, forKey: key) else { throw ControlRefusal("missing \"\(key.rawValue)\"") }
                return s
            }
            node = try text(.node)
            option = try text(.option)
        }
    }

    public struct SetOption: Codable, Sendable, Equatable {
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

        enum CodingKeys: String, CodingKey { case value, at }

        public init(from decoder: any Swift.Decoder) throws {
            target = try OptionName(from: decoder)
            let c = try decoder.container(keyedBy: CodingKeys.self)
            guard let value = try? c.decode(EventValue.self, forKey: .value) else { throw ControlRefusal("missing \"value\"") }
            self.value = value
            if c.contains(.at) {
                let raw = try? c.decode(EventValue.self, forKey: .at)
                guard let seconds = raw.flatMap(Self.mediaTime) else {
                    throw ControlRefusal("\"at\" must be a media time in seconds (a number, or like \"12.5s\")")
                }
                at = seconds
            }
        }

        public func encode(to encoder: any Swift.Encoder) throws {
            try target.encode(to: encoder)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(value, forKey: .value)
            try c.encodeIfPresent(at, forKey: .at)
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
    }

    /// `stop`'s only field: why, for the `stopping` event (a reason that is not a string is left out).
    public struct StopFields: Codable, Sendable, Equatable {
        public var reason: String?
        public init(reason: String?) { self.reason = reason }
        enum CodingKeys: String, CodingKey { case reason }
        public init(from decoder: any Swift.Decoder) throws {
            reason = try? decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(String.self, forKey: .reason)
        }
    }

    /// The request of a command that has no fields besides `cmd` and `id`.
    public struct NoFields: Codable, Sendable, Equatable {}

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

    enum Key: String, CodingKey { case cmd }

    /// Refuses with `ControlRefusal`, in the words a client is sent.
    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        guard let cmd = try? c.decode(String.self, forKey: .cmd) else { throw ControlRefusal("missing \"cmd\"") }
        switch cmd {
        case "set": self = .set(try SetOption(from: decoder))
        case "get": self = .get(try OptionName(from: decoder))
        case "pause": self = .pause
        case "resume": self = .resume
        case "stop": self = .stop(reason: try StopFields(from: decoder).reason)
        case "stats": self = .stats
        case "watch": self = .watch
        case "graph": self = .graph
        default:
            let all = try decoder.container(keyedBy: AnyKey.self)
            var fields: [String: EventValue] = [:]
            for key in all.allKeys where key.stringValue != "cmd" && key.stringValue != "id" {
                fields[key.stringValue] = try? all.decode(EventValue.self, forKey: key)
            }
            self = .node(command: cmd, fields: fields)
        }
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(command, forKey: .cmd)
        switch self {
        case .set(let s): try s.encode(to: encoder)
        case .get(let g): try g.encode(to: encoder)
        case .stop(let reason): try StopFields(reason: reason).encode(to: encoder)
        case .node(_, let fields):
            var all = encoder.container(keyedBy: AnyKey.self)
            for (key, value) in fields where key != "cmd" && key != "id" { try all.encode(value, forKey: AnyKey(stringValue: key)) }
        case .pause, .resume, .stats, .watch, .graph: break
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
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

    enum Key: String, CodingKey { case id }

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
        id = try? decoder.container(keyedBy: Key.self).decodeIfPresent(EventValue.self, forKey: .id)
        request = try ControlRequest(from: decoder)
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        try request.encode(to: encoder)
        var c = encoder.container(keyedBy: Key.self)
        try c.encodeIfPresent(id, forKey: .id)
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
public struct ControlReply: Sendable, Codable {
    public var id: EventValue?
    public var outcome: Result<any ControlReplyBody, ControlRefusal>

    public init(_ outcome: Result<any ControlReplyBody, ControlRefusal>, id: EventValue? = nil) {
        self.outcome = outcome
        self.id = id
    }

    public static func refused(_ message: String, id: EventValue? = nil) -> ControlReply { .init(.failure(ControlRefusal(message)), id: id) }

    public var ok: Bool { if case .success = outcome { return true } else { return false } }

    enum Key: String, CodingKey { case ok, error, id }

    /// The decoder's `userInfo` entry naming the body's type (`any ControlReplyBody.Type`): a
    /// reply does not say which command it answers, so the reader says what it asked. Without
    /// it the body reads as an `UntypedReply`.
    public static let bodyType = CodingUserInfoKey(rawValue: "avgraph.control.reply-body")!

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        id = try? c.decodeIfPresent(EventValue.self, forKey: .id)
        if try c.decode(Bool.self, forKey: .ok) {
            let body = decoder.userInfo[Self.bodyType] as? any ControlReplyBody.Type ?? UntypedReply.self
            outcome = .success(try body.init(from: decoder))
        } else {
            outcome = .failure(ControlRefusal(try c.decode(String.self, forKey: .error)))
        }
    }

    /// A reply line read with its body as `body` (the reply type of the command that was asked).
    public static func decode(line: Data, as body: any ControlReplyBody.Type = UntypedReply.self) throws -> ControlReply {
        let decoder = JSONDecoder()
        decoder.userInfo[bodyType] = body
        return try decoder.decode(ControlReply.self, from: line)
    }

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

/// A reply body read without knowing the command: its fields as JSON values.
public struct UntypedReply: ControlReplyBody, Equatable {
    public var fields: [String: EventValue]
    public init(fields: [String: EventValue]) { self.fields = fields }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: ControlRequest.AnyKey.self)
        var fields: [String: EventValue] = [:]
        for key in c.allKeys where !["ok", "id", "error"].contains(key.stringValue) {
            fields[key.stringValue] = try c.decode(EventValue.self, forKey: key)
        }
        self.fields = fields
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: ControlRequest.AnyKey.self)
        for (key, value) in fields { try c.encode(value, forKey: .init(stringValue: key)) }
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
