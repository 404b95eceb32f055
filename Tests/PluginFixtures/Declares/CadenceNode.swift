import AVGraph

/// Passes pictures through untouched and emits a `beat` every `cadence.every` pictures: a plugin
/// that declares an event kind and an option value type the runtime does not know.
final class CadenceNode: Filter, Node {
    static let typeName = "cadence"
    static let summary = "passes pictures through; a beat event every N pictures"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo], doc: "the input, unchanged")]
    static let cadence = Setting.value("cadence", Cadence.self, default: "{every: 10, label: beat}", doc: "how often a beat comes, and its label")
    static let options = [cadence.spec]
    static let events: [any NodeEvent.Type] = [Beat.self]

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { n.inputs.map(\.format) }

    private let cadence: Cadence
    private var pictures = 0

    init(_ setup: NodeSetup) throws {
        guard let cadence = setup[Self.cadence] else { throw MediaError("cadence has no value") }
        self.cadence = cadence
    }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        pictures += 1
        if pictures % cadence.every == 0, let frame = buffer.frame {
            out.event(Beat(picture: pictures, mediaTime: frame.seconds, label: cadence.label))
        }
        out.emit(buffer)
    }
}

@_cdecl("avgraph_plugin")
public func avgraphPlugin(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?) -> Int32 {
    PluginAPI.entry(hostVersion, registrar) { r in try r.register(CadenceNode.self) }
}
