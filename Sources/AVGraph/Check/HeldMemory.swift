/// A node type that holds media beyond its input queues, or allocates it up front, by an amount
/// that follows from its options and formats (a `clips` window, an ingest source's picture
/// buffer). `check` warns when it alone exceeds the pipeline's `memory-limit`: at run time the
/// budget would drop media (or the process would simply take the memory) with no sign in the file.
public protocol HoldsMemory: Node {
    /// At most how many bytes the node holds given `n`, what they are (for the warning), and the
    /// option that sets them; nil when it cannot be told. `inputBitrates[i]` is what input `i`'s
    /// upstream node declares (`DeclaresBitrate`: an encoder's ceiling, bits per second), nil if nothing.
    static func heldBytes(_ n: Negotiation, inputBitrates: [Int?]) -> HeldMemory?
}

public struct HeldMemory: Sendable {
    public var bytes: Int
    public var what: String
    public var option: String?

    public init(bytes: Int, what: String, option: String? = nil) {
        self.bytes = bytes
        self.what = what
        self.option = option
    }

    /// `12.3 MB`: how check shows an amount.
    public static func megabytes(_ bytes: Int) -> String {
        let mb = Double(bytes) / 1e6
        return mb >= 100 ? "\(Int(mb.rounded())) MB" : "\((mb * 10).rounded() / 10) MB"
    }
}
