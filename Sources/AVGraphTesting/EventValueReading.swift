import AVGraph

/// What a test reads of a decoded event's field, typed: nil when the field holds another kind.
extension EventValue {
    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var int: Int? { if case .int(let i) = self { i } else { nil } }
    /// A number, whole or not (JSON does not tell `1` from `1.0`).
    public var double: Double? {
        switch self {
        case .number(let d): d
        case .int(let i): Double(i)
        default: nil
        }
    }
}
