import Foundation

/// `avgraph check`: every rule of docs/PIPE-FORMAT.md, all mistakes of a file in one pass.
/// A later stage skips what an earlier stage already refused, so one mistake gives one
/// diagnostic, not a cascade.
public struct Checker {
    public let registry: NodeRegistry
    public var overrides: [OptionOverride] = []
    /// Whether the `plugins:` a file names are loaded, which runs their code (constructors
    /// first). Off unless set: `run` and an embedding app set it; `check` and `inspect` only with
    /// `--allow-plugins`, so looking at a downloaded file never runs a library lying beside it.
    /// Plugins from `--plugin` are in `registry` already and not affected.
    public var loadsFilePlugins = false

    public init(registry: NodeRegistry, overrides: [OptionOverride] = []) {
        self.registry = registry
        self.overrides = overrides
    }

    static let topLevelKeys = ["pipeline", "realtime", "duration", "memory-limit", "control", "plugins", "nodes"]
    static let nodeKeys = ["type", "in", "queue"]
    public static let maxInputs = 1024

    public func check(path: String, displayName: String? = nil) -> CheckedPipeline {
        let shown = displayName ?? path
        return check(PipeLoader.load(path: path, displayName: shown), path: path, shown: shown)
    }

    /// Checks `contents` as if read from `path` (relative paths in it resolve against its folder).
    public func check(contents: Data, path: String) -> CheckedPipeline {
        guard contents.count <= PipeLoader.maxFileBytes else {
            return check((nil, [PipeLoader.tooBig(SourceLocation(file: path, line: 1, column: 1))]), path: path, shown: path)
        }
        return check(PipeLoader.parse(data: contents, file: path), path: path, shown: path)
    }

    private func check(_ loaded: (PipeValue?, [Diagnostic]), path: String, shown: String) -> CheckedPipeline {
        let (root, loadDiagnostics) = loaded
        let base = ((path as NSString).deletingLastPathComponent as NSString).isEqual(to: "") ? "." : (path as NSString).deletingLastPathComponent
        let stem = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        var result = CheckedPipeline(file: shown, baseDirectory: PathResolver.resolve(base, relativeTo: FileManager.default.currentDirectoryPath),
                                     settings: PipelineSettings(name: stem), nodes: [], diagnostics: loadDiagnostics)
        guard let root else { return result }
        var pass = Pass(checker: self, file: shown, result: result)
        pass.run(root)
        result = pass.result
        result.diagnostics.sort { ($0.location, $0.severity) < ($1.location, $1.severity) }
        return result
    }
}

private struct Pass {
    let checker: Checker
    let file: String
    var result: CheckedPipeline
    /// Nodes whose own definition failed: their dependents are not checked further.
    var broken: Set<String> = []
    var rawNodes: [(name: String, location: SourceLocation, body: PipeValue)] = []
    var inValues: [String: PipeValue] = [:]
    /// Where each node is in `result.nodes`: every lookup by name is one hash, so checking stays
    /// linear in the size of the file (a 20,000-node chain took 16 s when each was a scan).
    var index: [String: Int] = [:]
    /// Hints cost a comparison with every candidate: after this many comparisons, a hostile file
    /// of thousands of mistakes gets its errors without them.
    let hintBudget = HintBudget()

    final class HintBudget { var left = 50_000 }

    let defaultsCache = DefaultsCache()

    final class DefaultsCache {
        var byType: [ObjectIdentifier: [String: OptionValue]] = [:]
        func values(for type: any Node.Type) -> [String: OptionValue] {
            if let d = byType[ObjectIdentifier(type)] { return d }
            var filled = OptionValues()
            filled.fillDefaults(from: type.options)
            byType[ObjectIdentifier(type)] = filled.values
            return filled.values
        }
    }
    /// The checker's node types plus this file's `plugins:` (loaded into a copy, so one file's
    /// plugins never leak into the next file checked).
    var registry: NodeRegistry
    /// The file's plugins that were not loaded (`loadsFilePlugins` off).
    var unloadedPlugins: [String] = []

    init(checker: Checker, file: String, result: CheckedPipeline) {
        self.checker = checker
        self.registry = checker.registry
        self.file = file
        self.result = result
    }

    mutating func error(_ at: SourceLocation, _ message: String, hint: String? = nil) {
        result.diagnostics.append(.error(at, message, hint: hint))
    }

    mutating func loadPlugin(_ path: String, at location: SourceLocation) {
        guard checker.loadsFilePlugins else {
            unloadedPlugins.append(path)
            warning(location, "plugin \(path) not loaded: checking a file runs no code it names",
                    hint: "pass --allow-plugins to load the plugins the file names, if you trust them")
            return
        }
        if registry === checker.registry { registry = checker.registry.copy() }
        var warnings: [String] = []
        do { try PluginLoader.load(path, into: registry, warn: { warnings.append($0) }) } catch {
            self.error(location, error.message, hint: error.reason == .notFound ? "plugin paths are relative to the .pipe file" : nil)
        }
        for w in warnings { warning(location, w) }
    }

    func hint(for word: String, in candidates: @autoclosure () -> [String]) -> String? {
        guard hintBudget.left > 0 else { return nil }
        let all = candidates()
        hintBudget.left -= all.count
        return Suggest.hint(for: word, in: all)
    }

    mutating func warning(_ at: SourceLocation, _ message: String, hint: String? = nil) {
        result.diagnostics.append(.warning(at, message, hint: hint))
    }

    mutating func run(_ root: PipeValue) {
        guard let top = root.entries else {
            error(root.location, "a .pipe file must be a mapping with 'nodes:', got \(root.shown)")
            return
        }
        var nodesValue: PipeValue?
        for e in top {
            switch e.key {
            case "nodes": nodesValue = e.value
            case "pipeline":
                if let s = e.value.scalar, !s.isEmpty, s.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }) {
                    result.settings.name = s
                } else {
                    error(e.value.location, "pipeline name must be a word of letters, digits, '-', '_' or '.', got \(e.value.shown)")
                }
            case "realtime":
                if case .bool(let b)? = parseReporting(e.value, .bool, what: "'realtime'") { result.settings.realtime = b }
            case "duration":
                if case .duration(let d)? = parseReporting(e.value, .duration(0.001...1e7), what: "'duration'") { result.settings.duration = d }
            case "memory-limit":
                if case .int(let b)? = parseReporting(e.value, .byteSize(1_000_000...1 << 40), what: "'memory-limit'") { result.settings.memoryLimit = b }
            case "control":
                if case .string(let s)? = parseReporting(e.value, .path(mustExist: false), what: "'control'") {
                    result.settings.control = PathResolver.resolve(s, relativeTo: result.baseDirectory)
                }
            case "plugins":
                if let list = e.value.list {
                    for item in list {
                        if let s = item.scalar {
                            let path = PathResolver.resolve(s, relativeTo: result.baseDirectory)
                            result.settings.plugins.append(path)
                            loadPlugin(path, at: item.location)
                        } else { error(item.location, "a plugin must be a path, got \(item.shown)") }
                    }
                } else { error(e.value.location, "'plugins' must be a list of paths, got \(e.value.shown)") }
            default:
                error(e.keyLocation, "unknown top-level key '\(e.key)'",
                      hint: hint(for: e.key, in: Checker.topLevelKeys) ?? "known keys: \(Checker.topLevelKeys.joined(separator: ", "))")
            }
        }
        guard let nodesValue else {
            error(root.location, "missing 'nodes:'", hint: "a pipeline lists its nodes under 'nodes:'")
            return
        }
        guard let nodeEntries = nodesValue.entries else {
            error(nodesValue.location, "'nodes' must be a mapping of node name to node, got \(nodesValue.shown)")
            return
        }
        if nodeEntries.isEmpty { error(nodesValue.location, "'nodes' is empty") }
        for e in nodeEntries { defineNode(e) }
        applyOverrides()
        checkRequired()
        connect()
        if !findCycles() { negotiate() }
        warnUnused()
        for bypass in PrivacyBypass.find(in: result.nodes) where !broken.contains(bypass.sink.name) {
            warning(bypass.sink.location, bypass.message, hint: "pass it through the privacy node too, or through one of its own")
        }
        warnOverBudget()
    }

    func parse(_ value: PipeValue, _ type: OptionType) -> OptionValue? {
        do { return try type.parse(value) } catch { return nil }
    }

    mutating func parseReporting(_ value: PipeValue, _ type: OptionType, what: String) -> OptionValue? {
        do { return try type.parse(value) } catch {
            result.diagnostics.append(.error(error.at ?? value.location, "\(what): \(error.message)", hint: error.hint))
            return nil
        }
    }

    static func validName(_ s: String) -> Bool {
        guard let f = s.first, f.isASCII, f.isLowercase else { return false }
        return s.allSatisfy { ($0.isASCII && ($0.isLowercase || $0.isNumber)) || $0 == "_" || $0 == "-" }
    }

    mutating func defineNode(_ e: PipeEntry) {
        let name = e.key
        if !Pass.validName(name) {
            error(e.keyLocation, "node name '\(name)' is not valid", hint: "names are lowercase letters, digits, '_' and '-', starting with a letter")
            broken.insert(name)
        }
        guard let body = e.value.entries else {
            error(e.value.location, "node '\(name)' must be a mapping with 'type:', got \(e.value.shown)",
                  hint: "write it like \(name): {type: testsrc}")
            broken.insert(name)
            return
        }
        guard let typeEntry = body.first(where: { $0.key == "type" }) else {
            error(e.keyLocation, "node '\(name)' has no 'type'", hint: "add type: with one of `avgraph inspect`'s node types")
            broken.insert(name)
            return
        }
        guard let typeName = typeEntry.value.scalar,
              let type = registry.resolve(typeName, hasInputs: body.contains { $0.key == "in" }) else {
            if !unloadedPlugins.isEmpty {
                let plugins = unloadedPlugins.map { ($0 as NSString).lastPathComponent }.joined(separator: ", ")
                error(typeEntry.value.location, "unknown node type \(typeEntry.value.shown): the file's plugins (\(plugins)) were not loaded, so their node types are not known",
                      hint: "check runs no code a .pipe file names; pass --allow-plugins to load its plugins, if you trust them")
            } else {
                error(typeEntry.value.location, "unknown node type \(typeEntry.value.shown)",
                      hint: hint(for: typeEntry.value.scalar ?? "", in: registry.names) ?? "`avgraph inspect` lists the node types")
            }
            broken.insert(name)
            return
        }
        var node = CheckedNode(name: name, type: type, location: e.keyLocation, typeLocation: typeEntry.value.location,
                               options: OptionValues(), optionLocations: [:], inputs: [], inLocation: nil, outputs: [], queue: nil)
        node.origin = registry.origin(of: typeName) ?? "built-in"
        var optionsOK = true
        for entry in body where entry.key != "type" {
            switch entry.key {
            case "in":
                node.inLocation = entry.value.location
                inValues[name] = entry.value
            case "queue":
                node.queue = parseQueue(entry.value)
            default:
                guard let spec = type.option(entry.key) else {
                    error(entry.keyLocation, "unknown option '\(entry.key)' for node '\(name)' (\(typeName))",
                          hint: hint(for: entry.key, in: type.options.map(\.name) + Checker.nodeKeys)
                            ?? "`avgraph inspect \(typeName)` lists its options")
                    optionsOK = false
                    continue
                }
                node.optionLocations[spec.name] = entry.value.location
                if let v = parseReporting(entry.value, spec.type, what: "option '\(spec.name)' of '\(name)'") {
                    node.options[spec.name] = v
                    checkFile(spec, v, entry.value.location, node: name)
                } else { optionsOK = false }
            }
        }
        // Each type's defaults are parsed once, not once per node of that type.
        let defaults = defaultsCache.values(for: type)
        for (k, v) in defaults where node.options[k] == nil { node.options[k] = v }
        if !optionsOK { broken.insert(name) }
        if index[name] == nil { index[name] = result.nodes.count }
        result.nodes.append(node)
    }

    mutating func checkFile(_ spec: OptionSpec, _ v: OptionValue, _ at: SourceLocation, node: String) {
        guard case .path(mustExist: true) = spec.type, case .string(let p) = v else { return }
        let resolved = PathResolver.resolve(p, relativeTo: result.baseDirectory)
        var isDir: ObjCBool = false
        let before = result.diagnostics.count
        defer { if result.diagnostics.count > before { broken.insert(node) } }
        if !FileManager.default.fileExists(atPath: resolved, isDirectory: &isDir) {
            error(at, "file not found: '\(p)' (option '\(spec.name)' of '\(node)')", hint: "looked for \(resolved); paths are relative to the .pipe file")
        } else if isDir.boolValue {
            error(at, "'\(p)' is a folder, not a file (option '\(spec.name)' of '\(node)')")
        } else if !Self.isRegularFile(resolved) {
            // A node's format rule opens the file: a FIFO nobody writes to would hang check.
            error(at, "'\(p)' is not a regular file (a FIFO or a device?) (option '\(spec.name)' of '\(node)')")
        } else if !FileManager.default.isReadableFile(atPath: resolved) {
            error(at, "file '\(p)' cannot be read (option '\(spec.name)' of '\(node)')")
        }
    }

    static func isRegularFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
    }

    mutating func parseQueue(_ v: PipeValue) -> QueueSpec? {
        guard let entries = v.entries else {
            error(v.location, "'queue' must be a mapping like {size: 8, policy: drop-oldest}, got \(v.shown)")
            return nil
        }
        var q = QueueSpec(size: 8, policy: nil)
        for e in entries {
            switch e.key {
            case "size":
                if case .int(let n)? = parseReporting(e.value, .int(1...1000), what: "queue size") { q.size = n }
            case "policy":
                if case .string(let s)? = parseReporting(e.value, .choice(QueuePolicy.allCases.map(\.rawValue)), what: "queue policy") {
                    q.policy = QueuePolicy(rawValue: s)
                }
            default:
                error(e.keyLocation, "unknown queue key '\(e.key)'", hint: hint(for: e.key, in: ["size", "policy"]) ?? "use size and policy")
            }
        }
        return q
    }

    mutating func applyOverrides() {
        for (i, o) in checker.overrides.enumerated() {
            let at = SourceLocation(file: "--set", line: i + 1, column: 1)
            guard let idx = index[o.node] else {
                if !broken.contains(o.node) {
                    error(at, "--set \(o.node).\(o.option): no node named '\(o.node)'", hint: hint(for: o.node, in: result.nodes.map(\.name)))
                }
                continue
            }
            let type = result.nodes[idx].type
            guard let spec = type.option(o.option) else {
                error(at, "--set \(o.node).\(o.option): unknown option '\(o.option)' for \(type.typeName)",
                      hint: hint(for: o.option, in: type.options.map(\.name)))
                continue
            }
            let (value, diags) = PipeLoader.parse(data: Data(o.value.utf8), file: "--set")
            guard let value, diags.isEmpty else {
                error(at, "--set \(o.node).\(o.option): cannot read value '\(o.value)'")
                continue
            }
            if let v = parseReporting(relocated(value, at), spec.type, what: "--set \(o.node).\(o.option)") {
                result.nodes[idx].options[spec.name] = v
                checkFile(spec, v, at, node: o.node)
            } else { broken.insert(o.node) }
        }
    }

    mutating func checkRequired() {
        for node in result.nodes {
            for spec in node.type.options where spec.required && node.options[spec.name] == nil {
                error(node.location, "node '\(node.name)' (\(node.type.typeName)) is missing required option '\(spec.name)'",
                      hint: "add \(spec.name): (\(spec.type.example ?? spec.type.name)) — \(spec.doc)")
                broken.insert(node.name)
            }
        }
    }

    func relocated(_ v: PipeValue, _ at: SourceLocation) -> PipeValue {
        switch v {
        case .scalar(let s, _): return .scalar(s, at)
        case .list(let l, _): return .list(l.map { relocated($0, at) }, at)
        case .map(let m, _): return .map(m.map { PipeEntry(key: $0.key, keyLocation: at, value: relocated($0.value, at)) }, at)
        }
    }

    // MARK: edges

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
                    if let fault = contractFault(node.type, formats) {
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
    func topologicalOrder() -> [Int] {
        var waiting = result.nodes.map { node in node.inputs.count { index[$0.from] != nil } }
        var feeds = [[Int]](repeating: [], count: result.nodes.count)
        for (i, node) in result.nodes.enumerated() {
            for c in node.inputs { if let up = index[c.from] { feeds[up].append(i) } }
        }
        var order = result.nodes.indices.filter { waiting[$0] == 0 }
        var next = 0
        while next < order.count {
            for d in feeds[order[next]] {
                waiting[d] -= 1
                if waiting[d] == 0 { order.append(d) }
            }
            next += 1
        }
        return order
    }

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
