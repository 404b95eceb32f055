import AVGraph

/// A plugin whose node type is named like the watermark plugin's (and like nothing built in).
final class OtherWatermark: Filter, Node, @unchecked Sendable {
    static let typeName = "watermark"
    static let summary = "a second node type called watermark"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { n.inputs.map(\.format) }
    init(_ setup: NodeSetup) throws {}
}

@_cdecl("avgraph_plugin")
public func avgraphPlugin(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?) -> Int32 {
    PluginAPI.entry(hostVersion, registrar) { r in try r.register(OtherWatermark.self) }
}
