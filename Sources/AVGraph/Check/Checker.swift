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

struct Pass {
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
        if result.isValid { result.diagnostics += result.orientationNotes() + result.passthroughSizeNotes() }
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
}
