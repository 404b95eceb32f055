/// The type of an option: what it parses, what range it accepts, how `inspect` shows it.
public indirect enum OptionType: Sendable {
    case bool
    case int(ClosedRange<Int>)
    case number(ClosedRange<Double>)
    case string
    case choice([String])
    case size
    case rate(ClosedRange<Double>)
    case bitrate(ClosedRange<Int>)
    case duration(ClosedRange<Double>)
    case gain
    case byteSize(ClosedRange<Int>)
    case color
    /// A path relative to the `.pipe` file; `mustExist` makes `check` look for it.
    case path(mustExist: Bool)
    case orientation
    /// A fixed orientation or a schedule `[{at: 0s, value: up}, ...]`.
    case orientationSchedule
    /// Spans of media time `[{at: 20s, for: 10s}]`.
    case spans
    /// A list of secrets (stream keys): never shown, only counted.
    case secrets
    /// `false`, `true` (forever) or a count of plays.
    case loop
    /// A mapping from an input's name to a value of the inner type.
    case perInput(OptionType)
    /// How a network sink retries: `{attempts: 10, backoff: 1s..30s}` (exponential, from the first
    /// delay doubling up to the last).
    case retry
    /// A mapping with these keys, each of its own type (`h264`'s `adaptive: {min: 800k}`); every key
    /// may be left out. Its value is `OptionValue.perInput` keyed by field.
    case fields([String: OptionType])
    /// A type a node declares itself (`OptionValueType`); its value is `OptionValue.declared`.
    case declared(any OptionValueType.Type)

    public var name: String {
        switch self {
        case .bool: return "bool"
        case .int: return "int"
        case .number: return "number"
        case .string: return "string"
        case .choice(let c): return c.joined(separator: "|")
        case .size: return "size"
        case .rate: return "rate"
        case .bitrate: return "bitrate"
        case .duration: return "duration"
        case .gain: return "gain"
        case .byteSize: return "byte size"
        case .color: return "color"
        case .path: return "path"
        case .orientation: return "orientation"
        case .orientationSchedule: return "orientation or schedule"
        case .spans: return "schedule"
        case .secrets: return "list of secrets"
        case .loop: return "bool|count"
        case .perInput(let t): return "map input -> \(t.name)"
        case .retry: return "{attempts: N, backoff: MIN..MAX}"
        case .fields(let f): return "{" + f.keys.sorted().map { "\($0): \(f[$0]!.name)" }.joined(separator: ", ") + "}"
        case .declared(let t): return t.syntax
        }
    }

    /// The accepted range in the option's own syntax, for `inspect` and messages.
    public var rangeText: String? {
        switch self {
        case .int(let r): return "\(r.lowerBound)..\(r.upperBound)"
        case .number(let r): return "\(Self.num(r.lowerBound))..\(Self.num(r.upperBound))"
        case .rate(let r): return "\(Self.num(r.lowerBound))..\(Self.num(r.upperBound))"
        case .bitrate(let r): return "\(Self.bits(r.lowerBound))..\(Self.bits(r.upperBound))"
        case .duration(let r): return "\(Self.num(r.lowerBound))s..\(Self.num(r.upperBound))s"
        case .byteSize(let r): return "\(r.lowerBound)..\(r.upperBound) bytes"
        case .choice(let c): return c.joined(separator: ", ")
        case .orientation, .orientationSchedule: return Orientation.allCases.map(\.rawValue).joined(separator: ", ")
        case .gain: return "-inf..+60dB"
        default: return nil
        }
    }

    static func num(_ d: Double) -> String { d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d) }
    static func bits(_ b: Int) -> String {
        if b >= 1_000_000 && b % 1_000_000 == 0 { return "\(b / 1_000_000)M" }
        if b >= 1000 && b % 1000 == 0 { return "\(b / 1000)k" }
        return "\(b)"
    }
}

/// One row of a node type's option table, as FFmpeg's `AVOption`: name, type, default, range, doc.
public struct OptionSpec: Sendable {
    public var name: String
    public var type: OptionType
    /// The default in the option's own syntax; nil when there is none.
    public var defaultText: String?
    public var required: Bool
    /// Can be changed while the pipeline runs (`avgraph ctl set`).
    public var live: Bool
    public var doc: String

    public init(_ name: String, _ type: OptionType, default defaultText: String? = nil, required: Bool = false,
                live: Bool = false, doc: String) {
        self.name = name
        self.type = type
        self.defaultText = defaultText
        self.required = required
        self.live = live
        self.doc = doc
    }
}
