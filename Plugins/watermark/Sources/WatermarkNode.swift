import AVGraph

public final class WatermarkNode: Node {
    public static let typeName = "watermark"
    public static let summary = "draws a PNG or a line of text at a corner of the picture"
    public static let inputs = [PadSpec("video", [.rawVideo])]
    public static let outputs = [PadSpec("video", [.rawVideo])]
    public static let options: [OptionSpec] = []
    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [n.inputs[0].format] }
    public init(_ setup: NodeSetup) throws {}
}
