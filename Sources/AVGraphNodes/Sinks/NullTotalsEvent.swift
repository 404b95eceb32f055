import AVGraph

/// A `null` sink's totals per input, at its end.
public struct NullTotalsEvent: NodeEvent, Equatable {
    public static let eventName = "null"
    public static let summary = "A null sink's totals per input."
    public static var fields: [EventField] {
        [.list("inputs", of: ["type": "string"]), .list("counts", of: EventField.integer()), .list("bytes", of: EventField.integer())]
    }
    public static var example: Self { Self(inputs: ["video", "audio"], counts: [90, 141], bytes: [912_000, 36_000]) }

    public var inputs: [String]
    public var counts: [Int]
    public var bytes: [Int]
    public init(inputs: [String], counts: [Int], bytes: [Int]) { self.inputs = inputs; self.counts = counts; self.bytes = bytes }

    public var text: String { zip(inputs, counts).map { "\($0): \($1)" }.joined(separator: ", ") }
}
