import AVGraph

/// `null`: consumes anything and counts it (benchmarks, tests); reports the counts at the end.
public final class NullNode: Sink, Node {
    public static let typeName = "null"
    public static let summary = "consumes and counts frames or packets, writes nothing"
    public static let inputs = [PadSpec("in", Set(MediaKind.allCases), variadic: true, doc: "any media, raw or encoded")]
    public static let options: [OptionSpec] = []
    public static let events: [any NodeEvent.Type] = [NullTotalsEvent.self]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }

    private let names: [String]
    private var counts: [Int]
    private var bytes: [Int]

    public init(_ setup: NodeSetup) throws {
        names = setup.inputs.map(\.from)
        counts = Array(repeating: 0, count: setup.inputs.count)
        bytes = Array(repeating: 0, count: setup.inputs.count)
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        counts[input] += 1
        bytes[input] += buffer.byteCount
    }

    override public func finish(_ out: Outlet) throws {
        out.event(NullTotalsEvent(inputs: names, counts: counts, bytes: bytes))
    }
}
