import Foundation

/// The graph of a checked pipeline as plain data (JSON-ready): nodes with their type, origin and
/// the options the file sets, edges with the negotiated format. `check --format json|dot` print
/// it; a running pipeline adds live figures to each edge (`ctl NAME graph`).
extension CheckedPipeline {
    public var graphJSON: [String: Any] {
        var nodeList: [[String: Any]] = []
        for n in nodes {
            var options: [String: String] = [:]
            for (name, _) in n.optionLocations {
                guard let v = n.options[name], let spec = n.type.option(name) else { continue }
                // A URL shown here is a stream key shown: `check --format dot`, `ctl NAME graph`.
                options[name] = Redaction.text(v.shown(as: spec.type))
            }
            var o: [String: Any] = ["name": n.name, "type": n.type.typeName, "role": n.type.role.rawValue,
                                    "options": options]
            if n.origin != "built-in" { o["plugin"] = n.origin }
            nodeList.append(o)
        }
        return ["pipeline": settings.name, "nodes": nodeList, "edges": edges.map(\.json)]
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

        public var json: [String: Any] {
            var o: [String: Any] = ["from": from, "from_pad": fromPad, "to": to, "to_pad": toPad]
            if let format {
                o["kind"] = format.kind.rawValue
                o["format"] = format.label
            }
            return o
        }
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
        default: return text
        }
    }
}
