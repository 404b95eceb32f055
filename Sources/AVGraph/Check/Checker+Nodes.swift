import Foundation

/// Checking one node: its type, options, files, queue; overrides and required options.
extension Pass {
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
}
