import AVGraph

/// This plugin's own option value type: every how many pictures a beat comes, and its label,
/// written `{every: 10, label: beat}`.
public struct Cadence: OptionValueType {
    public var every: Int
    public var label: String

    public static let syntax = "{every: N, label: WORD}"
    public static let example = "{every: 10, label: beat}"
    public static var schema: JSONValue {
        ["type": "object", "additionalProperties": false, "required": ["every"], "properties": [
            "every": ["type": "integer", "minimum": 1], "label": ["type": "string", "pattern": "^[a-z]+$"],
        ]]
    }

    public static func parse(_ value: PipeValue) throws(ValueProblem) -> Cadence {
        guard let entries = value.entries else {
            throw ValueProblem(message: "expected a cadence like \(example), got \(value.shown)", hint: "write it like \(example)")
        }
        var cadence = Cadence(every: 0, label: "beat")
        for e in entries {
            switch e.key {
            case "every":
                guard let n = e.value.scalar.flatMap({ Int($0) }), n >= 1 else {
                    throw ValueProblem(message: "every is a count of pictures from 1, got \(e.value.shown)", at: e.value.location)
                }
                cadence.every = n
            case "label":
                guard let s = e.value.scalar, !s.isEmpty, s.allSatisfy({ $0.isLetter && $0.isLowercase }) else {
                    throw ValueProblem(message: "label is a lower-case word, got \(e.value.shown)", at: e.value.location)
                }
                cadence.label = s
            default:
                throw ValueProblem(message: "unknown key '\(e.key)'", hint: "use every, label", at: e.keyLocation)
            }
        }
        guard cadence.every > 0 else { throw ValueProblem(message: "a cadence needs 'every'", hint: "write it like \(example)", at: value.location) }
        return cadence
    }

    public var text: String { "{every: \(every), label: \(label)}" }
}

/// This plugin's own event kind: the `every`-th picture went by.
public struct Beat: NodeEvent {
    public static let eventName = "beat"
    public static let summary = "Every `every` pictures: the picture's number (from 1), its media time, the cadence's label."
    public static var fields: [EventField] { [.integer("picture", minimum: 1), .number("media_time"), .string("label")] }
    public static var example: Self { Self(picture: 10, mediaTime: 0.3, label: "beat") }

    public var picture: Int
    public var mediaTime: Double
    public var label: String
    enum CodingKeys: String, CodingKey { case picture, mediaTime = "media_time", label }

    public var text: String { "\(label) at picture \(picture)" }
}
