/// What a node does with the orientation tag of the pictures it takes (`Node.orientationHandling`).
/// A phone may send its picture turned, with a tag saying how to stand it up: it can be turned
/// (new pixels, so encoded again) or carried to the viewer as the container's display matrix
/// (MP4 `tkhd`), which keeps the phone's own packets. `check` decides per `orient` output which,
/// from the nodes its pictures reach.
public enum OrientationHandling: Sendable {
    /// Takes upright pictures, or ignores the tag (the default: an encoder feeding FLV or MPEG-TS).
    case needsUpright
    /// Passes each picture's tag on with what it makes of it (a privacy card drawn the same way
    /// round, an `h264 passthrough: auto` stream declaring its first picture's tag).
    case passesOn
    /// Writes the tag as the container's display matrix (a `file` sink writing MP4 or MOV).
    case carries
    /// Stands pictures upright, unless every node its pictures reach carries the tag (`orient`).
    case turns
}

extension CheckedPipeline {
    /// Whether the tag of `node`'s output `output` reaches every viewer as a display matrix:
    /// every node its pictures reach carries it, or passes it on to nodes that do. An output
    /// nothing reads does not qualify (nothing would show the tag).
    public func orientationCarried(node: String, output: Int) -> Bool {
        orientationCarried(node: node, output: output, consumers: consumerIndex())
    }

    func orientationCarried(node: String, output: Int, consumers: ConsumerIndex) -> Bool {
        orientationBlockers(node: node, output: output, consumers: consumers).isEmpty && !consumers.of(node, output).isEmpty
    }

    /// The nodes reached from `node`'s output `output` (through nodes passing the tag on) that
    /// need upright pictures: why that output's pictures are turned.
    public func orientationBlockers(node: String, output: Int) -> [CheckedNode] {
        orientationBlockers(node: node, output: output, consumers: consumerIndex())
    }

    func orientationBlockers(node: String, output: Int, consumers: ConsumerIndex) -> [CheckedNode] {
        var visited: Set<String> = []
        var blockers: [CheckedNode] = []
        func follow(_ node: String, _ output: Int) {
            guard visited.insert("\(node).\(output)").inserted else { return }
            for (consumer, input) in consumers.of(node, output) {
                switch consumer.type.orientationHandling(input: input, options: consumer.options) {
                case .carries: continue
                case .passesOn: for o in consumer.outputs.indices { follow(consumer.name, o) }
                case .needsUpright, .turns: blockers.append(consumer)
                }
            }
        }
        follow(node, output)
        return blockers
    }

    /// `check`'s note on each node that turns pictures unless their tag is carried, when the
    /// choice matters (a passthrough encoder on the way): which it is, and what makes it turn.
    func orientationNotes() -> [Diagnostic] {
        // One index for every node's walk: a long chain of `orient`s stays linear (a scan of the
        // graph per step made a 1 MiB hostile chain cost 48 s of `check`).
        let consumers = consumerIndex()
        return nodes.compactMap { node -> Diagnostic? in
            guard node.type.orientationHandling(input: 0, options: node.options) == .turns, !node.outputs.isEmpty else { return nil }
            var carriers: [String] = []
            var passing: [String] = []
            var visited: Set<String> = []
            func follow(_ name: String) {
                guard visited.insert(name).inserted else { return }
                for (consumer, input) in consumers.of(name, 0) {
                    switch consumer.type.orientationHandling(input: input, options: consumer.options) {
                    case .carries: carriers.append(consumer.name)
                    case .passesOn:
                        if consumer.outputs.first?.kind == .encodedVideo { passing.append(consumer.name) }
                        follow(consumer.name)
                    default: break
                    }
                }
            }
            follow(node.name)
            guard !passing.isEmpty else { return nil }
            let quoted = { (names: [String]) in Set(names).sorted().map { "'\($0)'" }.joined(separator: ", ") }
            if orientationCarried(node: node.name, output: 0, consumers: consumers) {
                return Diagnostic(.note, at: node.location, "'\(node.name)' leaves the pictures as sent: their orientation reaches \(quoted(carriers)) "
                    + "as the display matrix, so \(quoted(passing)) can pass the source's packets on (a turn mid-stream is turned back to the first orientation)")
            }
            let blockers = orientationBlockers(node: node.name, output: 0, consumers: consumers).map(\.name)
            return Diagnostic(.note, at: node.location, "'\(node.name)' turns the pictures upright, so \(quoted(passing)) encodes them: "
                + "\(quoted(blockers)) cannot carry a display matrix (only a file sink writing MP4 or MOV can)")
        }
    }

    /// Who each output feeds, from one pass over the graph.
    func consumerIndex() -> ConsumerIndex {
        var index = ConsumerIndex()
        for c in nodes {
            for (i, input) in c.inputs.enumerated() { index.fed[ConsumerIndex.Key(node: input.from, output: input.fromOutput), default: []].append((c, i)) }
        }
        return index
    }
}

/// The nodes fed by each output, each with the input it is fed on.
struct ConsumerIndex {
    struct Key: Hashable { var node: String; var output: Int }
    fileprivate(set) var fed: [Key: [(node: CheckedNode, input: Int)]] = [:]

    func of(_ node: String, _ output: Int) -> [(node: CheckedNode, input: Int)] { fed[Key(node: node, output: output)] ?? [] }
}
