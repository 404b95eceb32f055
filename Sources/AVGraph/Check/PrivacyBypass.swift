/// A screen whose pictures reach one sink through a privacy node (`coversPictures`) and another
/// sink around it: whatever the card hides in the first, the second records or sends. Found by
/// following each video source's pictures forward along video edges.
enum PrivacyBypass {
    struct Finding {
        var sink: CheckedNode
        var message: String
    }

    static func find(in nodes: [CheckedNode]) -> [Finding] {
        var consumers: [String: [String]] = [:]
        for node in nodes {
            for c in node.inputs where c.format?.kind.isVideo ?? true { consumers[c.from, default: []].append(node.name) }
        }
        let byName = Dictionary(nodes.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var findings: [Finding] = []
        for source in nodes where source.inputs.isEmpty && source.outputs.contains(where: { $0.kind == .rawVideo }) {
            // Each (node, covered so far) once: a graph with many branches stays linear.
            var seen: Set<String> = []
            var sinks: [(sink: CheckedNode, covered: Bool)] = []
            var stack = [(name: source.name, covered: false)]
            while let (name, covered) = stack.popLast() {
                guard let node = byName[name], seen.insert("\(covered)|\(name)").inserted else { continue }
                let now = covered || node.type.coversPictures
                let next = consumers[name] ?? []
                if next.isEmpty && node.type.outputs.isEmpty { sinks.append((node, now)) }
                for n in next { stack.append((n, now)) }
            }
            guard let guarded = sinks.first(where: { $0.covered }) else { continue }
            var named: Set<String> = []
            for (sink, covered) in sinks where !covered && named.insert(sink.name).inserted {
                findings.append(Finding(sink: sink, message: "'\(sink.name)' gets the pictures of '\(source.name)' without a privacy node, "
                    + "while '\(guarded.sink.name)' gets them behind one: what the card hides there, '\(sink.name)' keeps"))
            }
        }
        return findings
    }
}
