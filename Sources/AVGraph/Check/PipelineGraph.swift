import Foundation

/// The graph of a pipeline as data: nodes with their type, role, origin and the options the
/// file sets, edges with the negotiated format and, from a running pipeline, live figures.
/// `check --format json|dot` print it; `ctl NAME graph` gets it with the live figures.
public struct PipelineGraph: Codable, Sendable, Equatable {
    public struct Node: Codable, Sendable, Equatable {
        public var name: String
        public var type: String
        /// `source`, `filter` or `sink`.
        public var role: String
        /// The options the file sets, as written (a URL's secrets masked).
        public var options: [String: String]
        /// The plugin file that brought the type; nil for a built-in one.
        public var plugin: String?
        /// The options `set` may change while the run goes; nil when there are none.
        public var live: [LiveOption]?
        /// The control commands the node answers itself (`AnswersControl`); nil when there are none.
        public var commands: [NodeCommand]?
    }

    /// An option `set` may change while the run goes, as its type declares it: what a client (the
    /// operator page) builds its controls from instead of knowing node types and option names.
    public struct LiveOption: Codable, Sendable, Equatable {
        public var name: String
        /// The value syntax as `inspect` names it (`bool`, `bitrate`, `map input -> bool`).
        public var type: String
        /// `switch` (a boolean), `switches` (a boolean per key of `keys`) or `text` (a value as a `.pipe` file writes it).
        public var control: String
        /// For a map per input: the names it is keyed by (the node's upstream nodes).
        public var keys: [String]?
        /// The accepted range in the option's own syntax (`10k..200M`).
        public var range: String?
        /// The value now (from a running pipeline: after the changes so far), as a `.pipe` file writes it.
        public var value: String?
        public var doc: String
    }

    /// A command a node answers (`clips`: `clip`), with what its request must carry.
    public struct NodeCommand: Codable, Sendable, Equatable {
        public var name: String
        public var doc: String
        /// The request's fields that have one possible value (`clip`: `action: save`).
        public var fixed: [String: EventValue]
        /// The fields a client fills itself (`clip`: `path`).
        public var needs: [String]
    }

    public struct Link: Codable, Sendable, Equatable {
        public var from: String
        public var fromPad: String
        public var to: String
        public var toPad: String
        public var kind: String?
        public var format: String?
        /// Live: buffers a second over the last few stats intervals.
        public var rate: Double?
        /// Live: the consumer's queue for this edge.
        public var queue: Int?
        public var capacity: Int?
        public var dropped: Int?

        enum CodingKeys: String, CodingKey {
            case from, to, kind, format, rate, queue, capacity, dropped
            case fromPad = "from_pad", toPad = "to_pad"
        }
    }

    public var pipeline: String
    public var nodes: [Node]
    public var edges: [Link]
    /// Live: the run's media time.
    public var mediaTime: Double?

    enum CodingKeys: String, CodingKey {
        case pipeline, nodes, edges
        case mediaTime = "media_time"
    }
}

extension CheckedPipeline {
    public var graph: PipelineGraph {
        let list = nodes.map { n in
            var options: [String: String] = [:]
            for (name, _) in n.optionLocations {
                guard let v = n.options[name], let spec = n.type.option(name) else { continue }
                // A URL shown here is a stream key shown: `check --format dot`, `ctl NAME graph`.
                options[name] = Redaction.text(v.shown(as: spec.type))
            }
            let upstream = n.inputs.map(\.from)
            let live = n.type.options.filter(\.live).map { spec in
                PipelineGraph.LiveOption(spec, value: n.options[spec.name].map { Redaction.text($0.shown(as: spec.type)) }, upstream: upstream)
            }
            let commands = (n.type as? any AnswersControl.Type)?.controlCommands.map(PipelineGraph.NodeCommand.init)
            return PipelineGraph.Node(name: n.name, type: n.type.typeName, role: n.type.role.rawValue,
                                      options: options, plugin: n.origin != "built-in" ? n.origin : nil,
                                      live: live.isEmpty ? nil : live, commands: commands?.isEmpty == false ? commands : nil)
        }
        return PipelineGraph(pipeline: settings.name, nodes: list, edges: edges.map(\.link))
    }

    /// Every connection, in the order of the consumers' inputs (a node's lanes).
    public var edges: [Edge] {
        nodes.flatMap { n in
            n.inputs.enumerated().map { i, c in
                Edge(from: c.from, fromPad: c.fromPad, fromOutput: c.fromOutput, to: n.name, toPad: c.pad, lane: i, format: c.format)
            }
        }
    }

    public struct Edge: Sendable {
        public var from: String
        public var fromPad: String
        public var fromOutput: Int
        public var to: String
        public var toPad: String
        /// Index among the consumer's inputs: its queue (lane) at run time.
        public var lane: Int
        public var format: StreamFormat?

        public var link: PipelineGraph.Link {
            PipelineGraph.Link(from: from, fromPad: fromPad, to: to, toPad: toPad, kind: format?.kind.rawValue, format: format?.label)
        }
    }
}

extension PipelineGraph.LiveOption {
    init(_ spec: OptionSpec, value: String?, upstream: [String]) {
        name = spec.name
        type = spec.type.name
        range = spec.type.rangeText
        doc = spec.doc
        self.value = value
        switch spec.type {
        case .bool: control = "switch"
        case .perInput(.bool): control = "switches"; keys = upstream
        default: control = "text"
        }
    }
}

extension PipelineGraph.NodeCommand {
    /// Read off the request's fields type, as `inspect --control-schema` reads it.
    init(_ spec: ControlCommandSpec) {
        name = spec.name
        doc = spec.doc
        let schema = DecodableSchema.of(spec.fields)
        var fixed: [String: EventValue] = [:]
        for (key, property) in schema["properties"]?.members ?? [:] {
            if let value = property["const"]?.eventValue { fixed[key] = value }
        }
        self.fixed = fixed
        needs = (schema["required"]?.strings ?? []).filter { $0 != "cmd" && fixed[$0] == nil }
    }
}

extension StreamFormat {
    /// The format as a person reads it: `1280x720 yuv420p 30/1 upright`, `48000 Hz stereo fltp`,
    /// `h264 High 2.5 Mbit/s`.
    public var label: String {
        switch kind {
        case .rawVideo:
            var parts = ["\(width)x\(height)", pixelFormat, "\(frameRate.num)/\(frameRate.den)", tagged ? "tagged" : "upright"]
            if sizeVaries { parts.append("size varies") }
            return parts.filter { !$0.isEmpty }.joined(separator: " ")
        case .rawAudio:
            return "\(sampleRate) Hz \(Self.channelLayout(channels)) \(sampleFormat)"
        case .encodedVideo:
            return [codec, Self.profileName(profile), "\(width)x\(height)", Self.bitRateText(bitRate)].filter { !$0.isEmpty }.joined(separator: " ")
        case .encodedAudio:
            return [codec, Self.profileName(profile), Self.bitRateText(bitRate), "\(sampleRate) Hz", Self.channelLayout(channels)]
                .filter { !$0.isEmpty }.joined(separator: " ")
        }
    }

    static func channelLayout(_ n: Int) -> String { n == 1 ? "mono" : n == 2 ? "stereo" : "\(n) ch" }

    static func profileName(_ p: String) -> String { p == "lc" ? "LC" : p.prefix(1).uppercased() + p.dropFirst() }

    static func bitRateText(_ b: Int) -> String {
        if b <= 0 { return "" }
        if b >= 1_000_000 { return "\(OptionType.num(Double(b) / 1e6)) Mbit/s" }
        return "\(OptionType.num(Double(b) / 1e3)) kbit/s"
    }
}

extension OptionValue {
    /// The value as a person would write it in a `.pipe` file (`2500k`, `60s`).
    func shown(as type: OptionType) -> String {
        switch (self, type) {
        case (.int(let b), .bitrate): return OptionType.bits(b)
        case (.duration(let d), _): return "\(OptionType.num(d))s"
        case (.number(let d), _): return OptionType.num(d)
        case (.orientationSchedule(let c), _):
            if c.count == 1, c[0].at == 0 { return c[0].value.rawValue }
            return c.map { "\($0.value.rawValue) at \(OptionType.num($0.at))s" }.joined(separator: ", ")
        case (.spans(let s), _): return s.map { "\(OptionType.num($0.at))s for \(OptionType.num($0.length))s" }.joined(separator: ", ")
        case (.perInput(let m), .perInput(let inner)):
            return "{" + m.keys.sorted().map { "\($0): \(m[$0]!.shown(as: inner))" }.joined(separator: ", ") + "}"
        case (.perInput(let m), .fields(let fields)):
            return "{" + m.keys.sorted().map { key in "\(key): \(fields[key].map { m[key]!.shown(as: $0) } ?? m[key]!.text)" }.joined(separator: ", ") + "}"
        default: return text
        }
    }
}
