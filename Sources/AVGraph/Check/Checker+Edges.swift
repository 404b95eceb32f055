import Foundation

/// Checking the graph: connections, formats along each edge, cycles, order.
extension Pass {
    mutating func connect() {
        let names = result.nodes.map(\.name) + Array(broken)
        let refusedNames = Set(broken.map { $0.lowercased() })
        for idx in result.nodes.indices {
            let node = result.nodes[idx]
            let type = node.type
            guard let inValue = inValues[node.name] else { continue }
            if type.inputs.isEmpty {
                error(inValue.location, "node '\(node.name)' (\(type.typeName)) is a source and takes no inputs", hint: "remove 'in:'")
                broken.insert(node.name)
                continue
            }
            var refs: [(pad: String?, ref: String, at: SourceLocation)] = []
            let errorsBefore = result.diagnostics.count
            defer { if result.diagnostics.count > errorsBefore { broken.insert(node.name) } }
            switch inValue {
            case .scalar(let s, let at): refs.append((nil, s, at))
            case .list(let items, _):
                for item in items {
                    if let s = item.scalar { refs.append((nil, s, item.location)) } else { error(item.location, "an input must be a node name, got \(item.shown)") }
                }
            case .map(let entries, _):
                for e in entries {
                    guard type.inputs.contains(where: { $0.name == e.key }) else {
                        error(e.keyLocation, "node '\(node.name)' (\(type.typeName)) has no input pad '\(e.key)'",
                              hint: hint(for: e.key, in: type.inputs.map(\.name)) ?? "its inputs: \(type.inputs.map(\.name).joined(separator: ", "))")
                        continue
                    }
                    if let s = e.value.scalar { refs.append((e.key, s, e.value.location)) } else if let l = e.value.list {
                        for item in l { if let s = item.scalar { refs.append((e.key, s, item.location)) } }
                    }
                }
            }
            // Format rules may compare each input with the others (a mixer names them): bounded.
            guard refs.count <= Checker.maxInputs else {
                error(inValue.location, "node '\(node.name)' has \(refs.count) inputs; a node takes at most \(Checker.maxInputs)")
                continue
            }
            var connections: [Connection] = []
            var usedPads: Set<String> = [], usedOutputs: Set<String> = []
            for r in refs {
                var upstream = r.ref
                var outPad: String?
                if let dot = r.ref.firstIndex(of: ".") {
                    upstream = String(r.ref[..<dot])
                    outPad = String(r.ref[r.ref.index(after: dot)...])
                }
                if upstream == node.name {
                    error(r.at, "node '\(node.name)' takes its own output as input (a cycle)")
                    continue
                }
                guard let up = index[upstream].map({ result.nodes[$0] }) else {
                    // A node whose own name was refused is already reported; naming it again is noise.
                    if !refusedNames.contains(upstream.lowercased()) {
                        error(r.at, "unknown upstream node '\(upstream)' in the inputs of '\(node.name)'",
                              hint: hint(for: upstream, in: names.filter { $0 != node.name }))
                    }
                    continue
                }
                let outs = up.type.outputs
                if outs.isEmpty {
                    error(r.at, "'\(upstream)' (\(up.type.typeName)) is a sink and has no outputs to feed '\(node.name)'")
                    continue
                }
                var outIndex: Int
                if let outPad {
                    guard let i = outs.firstIndex(where: { $0.name == outPad }) else {
                        error(r.at, "node '\(upstream)' (\(up.type.typeName)) has no output pad '\(outPad)'",
                              hint: hint(for: outPad, in: outs.map(\.name)) ?? "its outputs: \(outs.map(\.name).joined(separator: ", "))")
                        continue
                    }
                    outIndex = i
                } else if outs.count == 1 {
                    outIndex = 0
                } else {
                    let padKinds = r.pad.flatMap { p in type.inputs.first { $0.name == p }?.kinds } ?? Set(type.inputs.flatMap(\.kinds))
                    let fitting = outs.indices.filter { !outs[$0].kinds.isDisjoint(with: padKinds) }
                    guard fitting.count == 1 else {
                        error(r.at, "'\(upstream)' has several outputs (\(outs.map(\.name).joined(separator: ", "))); which one feeds '\(node.name)'?",
                              hint: "write \(outs.map { "'\(upstream).\($0.name)'" }.joined(separator: " or "))")
                        continue
                    }
                    outIndex = fitting[0]
                }
                let outKinds = outs[outIndex].kinds
                // Which pad of ours: the named one, else the first whose kinds fit.
                let pad: PadSpec?
                if let p = r.pad { pad = type.inputs.first { $0.name == p } } else {
                    pad = type.inputs.first { spec in !spec.kinds.isDisjoint(with: outKinds) && (spec.variadic || !usedPads.contains(spec.name)) }
                        ?? type.inputs.first
                }
                guard let pad else { continue }
                if pad.kinds.isDisjoint(with: outKinds) {
                    let gives = MediaKind.allCases.filter { outKinds.contains($0) }.map(\.rawValue).joined(separator: " or ")
                    var hint: String?
                    if type.outputs.isEmpty, let e = registry.converter(from: outKinds, to: pad.kinds) { hint = "encode it first: add a node like {type: \(e), in: \(r.ref)}" }
                    error(r.at, "media kind mismatch: input '\(pad.name)' of '\(node.name)' (\(type.typeName)) takes \(pad.kindsText), but '\(r.ref)' gives \(gives)", hint: hint)
                    continue
                }
                if !pad.variadic, usedPads.contains(pad.name) {
                    error(r.at, "input '\(pad.name)' of '\(node.name)' (\(type.typeName)) takes one connection; '\(r.ref)' is one too many")
                    continue
                }
                guard usedOutputs.insert("\(outIndex).\(upstream)").inserted else {
                    error(r.at, "'\(r.ref)' is connected to '\(node.name)' twice")
                    continue
                }
                usedPads.insert(pad.name)
                connections.append(Connection(pad: pad.name, from: upstream, fromOutput: outIndex, fromPad: outs[outIndex].name, location: r.at, format: nil))
            }
            result.nodes[idx].inputs = connections
        }
        for node in result.nodes where !node.type.inputs.isEmpty && !broken.contains(node.name) {
            let connectedOrTried = inValues[node.name] != nil
            for pad in node.type.inputs where pad.required && !node.inputs.contains(where: { $0.pad == pad.name }) {
                if connectedOrTried && node.inputs.count < refsCount(node.name) { continue }
                error(node.inLocation ?? node.location, "input '\(pad.name)' of '\(node.name)' (\(node.type.typeName)) is not connected",
                      hint: "add in: with an upstream node that gives \(pad.kindsText)")
                broken.insert(node.name)
            }
        }
    }

    func refsCount(_ name: String) -> Int {
        switch inValues[name] {
        case .scalar?: return 1
        case .list(let l, _)?: return l.count
        case .map(let m, _)?: return m.count
        default: return 0
        }
    }

    /// Reports each cycle once, at the 'in' of the node where it closes. True when one was found.
    /// A depth-first walk with its own stack: a chain of 50,000 nodes must not overflow the thread's.
    mutating func findCycles() -> Bool {
        var state = [UInt8](repeating: 0, count: result.nodes.count)  // 1 visiting, 2 done
        var depthOf = [Int](repeating: 0, count: result.nodes.count)  // where a visiting node is on the stack
        var found = false
        // The path being walked: a node and the next of its inputs to follow.
        var stack: [(node: Int, next: Int)] = []
        for start in result.nodes.indices where state[start] == 0 {
            state[start] = 1
            depthOf[start] = 0
            stack.append((start, 0))
            while let top = stack.last {
                let inputs = result.nodes[top.node].inputs
                guard top.next < inputs.count else {
                    state[top.node] = 2
                    stack.removeLast()
                    continue
                }
                stack[stack.count - 1].next += 1
                let c = inputs[top.next]
                guard let up = index[c.from] else { continue }
                if state[up] == 1 {
                    // The cycle is the stack from `up` to here; a long one is shown by its ends.
                    let path = stack[depthOf[up]...]
                    func names(_ part: ArraySlice<(node: Int, next: Int)>) -> [String] { part.map { result.nodes[$0.node].name } }
                    let names = path.count < 9 ? names(path) + [c.from]
                        : names(path.prefix(4)) + ["… \(path.count - 7) more"] + names(path.suffix(3)) + [c.from]
                    error(c.location, "cycle: \(names.reversed().joined(separator: " -> "))", hint: "a pipeline is a graph without loops")
                    found = true
                } else if state[up] == 0 {
                    state[up] = 1
                    depthOf[up] = stack.count
                    stack.append((up, 0))
                }
            }
        }
        return found
    }

    /// Topological order, then each node's format rule with the formats of its inputs.
    mutating func negotiate() {
        // Asks every node type whether it is live: once, not once per node.
        let realtime = result.realtime
        for idx in topologicalOrder() {
                let node = result.nodes[idx]
                if broken.contains(node.name) || node.inputs.contains(where: { broken.contains($0.from) }) {
                    broken.insert(node.name)
                    continue
                }
                var inputs: [Negotiation.Input] = []
                for (ci, c) in node.inputs.enumerated() {
                    guard let upIndex = index[c.from], case let up = result.nodes[upIndex], c.fromOutput < up.outputs.count else { continue }
                    let f = up.outputs[c.fromOutput]
                    result.nodes[idx].inputs[ci].format = f
                    inputs.append(.init(pad: c.pad, from: c.from, fromPad: c.fromPad, format: f))
                }
                let n = Negotiation(nodeName: node.name, options: node.options, inputs: inputs,
                                    baseDirectory: result.baseDirectory, realtime: realtime)
                do {
                    let formats = try node.type.negotiate(n)
                    if let fault = contractFault(node.type, formats) ?? threadFault(node.type, node.options) {
                        let origin = registry.origin(of: node.type.typeName) ?? "built-in"
                        self.error(node.typeLocation, "'\(node.name)' (\(node.type.typeName), \(origin == "built-in" ? "built in" : "plugin \(origin)")): \(fault)",
                                   hint: "a fault of the node type, not of this file: tell its author")
                        broken.insert(node.name)
                        continue
                    }
                    result.nodes[idx].outputs = formats
                } catch {
                    let at = error.option.flatMap { node.optionLocations[$0] } ?? node.inLocation ?? node.typeLocation
                    self.error(at, "'\(node.name)' (\(node.type.typeName)): \(error.message)", hint: error.hint)
                    broken.insert(node.name)
                }
        }
    }

    /// Every node after the nodes it takes input from (Kahn's algorithm; the graph has no cycle
    /// by now), in file order where the graph leaves a choice.
    func topologicalOrder() -> [Int] { CheckedPipeline.topologicalOrder(result.nodes, index: index) }

    /// A format rule must return one format per output pad, each of a kind the pad declares: the
    /// runtime relies on it, so a node type that breaks it is refused here rather than at run time.
    func contractFault(_ type: any Node.Type, _ formats: [StreamFormat]) -> String? {
        guard formats.count == type.outputs.count else {
            return "its format rule returned \(formats.count) format\(formats.count == 1 ? "" : "s") for \(type.outputs.count) output pad\(type.outputs.count == 1 ? "" : "s")"
        }
        for (pad, f) in zip(type.outputs, formats) where !pad.kinds.contains(f.kind) {
            return "its format rule returned \(f.kind.rawValue) for output pad '\(pad.name)', which carries \(pad.kindsText)"
        }
        return nil
    }

    /// A thread shared with producers runs its guests' buffers but never ticks them: a type
    /// that asks to share and keeps deadlines would silently lose its deadlines.
    func threadFault(_ type: any Node.Type, _ options: OptionValues) -> String? {
        guard type.sharesProducerThread(options: options), type.keepsDeadlines(options: options) else { return nil }
        return "it says it may run on its producers' thread (sharesProducerThread) and keeps deadlines of its own "
            + "(keepsDeadlines): a shared thread never ticks the nodes it runs"
    }

    /// Node types that hold media themselves say how much; more than `memory-limit` is worth a warning.
    mutating func warnOverBudget() {
        let limit = result.settings.memoryLimit
        let realtime = result.realtime
        for node in result.nodes where !broken.contains(node.name) {
            guard let type = node.type as? any HoldsMemory.Type else { continue }
            let bitrates = node.inputs.map { c -> Int? in
                guard let up = index[c.from].map({ result.nodes[$0] }) else { return nil }
                return (up.type as? any DeclaresBitrate.Type)?.bitrateCeiling(up.options)
            }
            let inputs = node.inputs.map { Negotiation.Input(pad: $0.pad, from: $0.from, fromPad: $0.fromPad, format: $0.format ?? StreamFormat(kind: .rawVideo)) }
            let n = Negotiation(nodeName: node.name, options: node.options, inputs: inputs, baseDirectory: result.baseDirectory, realtime: realtime)
            guard let held = type.heldBytes(n, inputBitrates: bitrates), held.bytes > limit else { continue }
            warning(held.option.flatMap { node.optionLocations[$0] } ?? node.location,
                    "'\(node.name)' (\(type.typeName)) holds \(held.what): \(HeldMemory.megabytes(held.bytes)), over the pipeline's memory-limit of \(HeldMemory.megabytes(limit))",
                    hint: "raise memory-limit, or make \(held.option.map { "'\($0)'" } ?? "it") smaller")
        }
    }

    mutating func warnUnused() {
        let used = Set(result.nodes.flatMap { $0.inputs.map { "\($0.from).\($0.fromOutput)" } })
        for node in result.nodes where !node.type.outputs.isEmpty && !broken.contains(node.name) {
            let unused = node.type.outputs.indices.filter { !used.contains("\(node.name).\($0)") }
            if unused.count == node.type.outputs.count {
                warning(node.location, "the output of '\(node.name)' goes nowhere", hint: "connect it to a node, or remove the node")
            }
        }
        if !result.nodes.contains(where: { $0.type.outputs.isEmpty }) && !result.nodes.isEmpty && result.isValid {
            warning(result.nodes[0].location, "the pipeline has no sink: nothing will be written", hint: "add a 'file' or 'null' node")
        }
    }
}
