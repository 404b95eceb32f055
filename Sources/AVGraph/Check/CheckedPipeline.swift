/// An edge's bounded queue and what it does when full (docs/PIPE-FORMAT.md, "Queues and memory-limit").
public enum QueuePolicy: String, Sendable, CaseIterable {
    case block
    case dropOldest = "drop-oldest"
    case dropNewest = "drop-newest"
    case dropToKeyframe = "drop-to-keyframe"
}

public struct QueueSpec: Sendable {
    public var size: Int
    public var policy: QueuePolicy?
}

/// One connection into a node: which of its pads, from which upstream node and output.
public struct Connection: Sendable {
    public var pad: String
    public var from: String
    public var fromOutput: Int
    /// The name of that output pad (`app` of `phone.app`).
    public var fromPad: String = ""
    public var location: SourceLocation
    public var format: StreamFormat?
}

public struct CheckedNode: Sendable {
    public var name: String
    public var type: any Node.Type
    public var location: SourceLocation
    public var typeLocation: SourceLocation
    public var options: OptionValues
    public var optionLocations: [String: SourceLocation]
    public var inputs: [Connection]
    public var inLocation: SourceLocation?
    public var outputs: [StreamFormat]
    public var queue: QueueSpec?
    /// Where the type came from: `built-in` or a plugin file's path.
    public var origin = "built-in"
}

public struct PipelineSettings: Sendable {
    public var name: String
    public var realtime: Bool?
    public var duration: Double?
    public var memoryLimit: Int = 64_000_000
    public var control: String?
    public var plugins: [String] = []
}

/// What `check` makes of a file: the graph with every option parsed and every edge's format,
/// or the diagnostics that stop it from running.
public struct CheckedPipeline: Sendable {
    public var file: String
    public var baseDirectory: String
    public var settings: PipelineSettings
    public var nodes: [CheckedNode]
    public var diagnostics: [Diagnostic]

    public var isValid: Bool { !diagnostics.contains { $0.severity == .error } }

    /// Every node after the nodes it takes input from (Kahn's algorithm: a long chain costs no
    /// recursion), in file order where the graph leaves a choice; `index`: node names to positions.
    static func topologicalOrder(_ nodes: [CheckedNode], index: [String: Int]) -> [Int] {
        var waiting = nodes.map { node in node.inputs.count { index[$0.from] != nil } }
        var feeds = [[Int]](repeating: [], count: nodes.count)
        for (i, node) in nodes.enumerated() {
            for c in node.inputs { if let up = index[c.from] { feeds[up].append(i) } }
        }
        var order = nodes.indices.filter { waiting[$0] == 0 }
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
    public func node(_ name: String) -> CheckedNode? { nodes.first { $0.name == name } }

    /// Realtime unless told otherwise when a source is live (a `LiveSource`: `app`, `socket`, ...).
    public var realtime: Bool { settings.realtime ?? hasLiveSource }
}

/// `--set NODE.OPTION=VALUE` from the command line.
public struct OptionOverride: Sendable {
    public var node: String
    public var option: String
    public var value: String

    public init?(parsing text: String) {
        guard let eq = text.firstIndex(of: "="), let dot = text[..<eq].firstIndex(of: ".") else { return nil }
        node = String(text[..<dot])
        option = String(text[text.index(after: dot)..<eq])
        value = String(text[text.index(after: eq)...])
        if node.isEmpty || option.isEmpty { return nil }
    }
}
