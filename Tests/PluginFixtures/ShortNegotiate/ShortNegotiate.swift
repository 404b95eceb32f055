import AVGraph

/// A plugin node type with two output pads whose format rule returns one format: a bug in the
/// plugin that `check` must report (naming the plugin) before anything runs.
final class SplitBroken: Filter, Node, @unchecked Sendable {
    static let typeName = "split-broken"
    static let summary = "two outputs, one negotiated format"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let outputs = [PadSpec("a", [.rawVideo]), PadSpec("b", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { n.inputs.map(\.format) }
    init(_ setup: NodeSetup) throws {}
}

@_cdecl("avgraph_plugin")
public func avgraphPlugin(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?) -> Int32 {
    PluginAPI.entry(hostVersion, registrar) { r in try r.register(SplitBroken.self) }
}
