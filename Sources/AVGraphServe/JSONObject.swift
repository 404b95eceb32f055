import AVGraph
import Foundation

/// serve's JSON: the auth question and answer, the hook bodies, the queue's files. One value type
/// (`EventValue`, the events' own), so a boolean stays a boolean and a number a number end to end.
public typealias JSONObject = [String: EventValue]

public enum ServeJSON {
    /// Keys sorted, `/` not escaped: as the events print.
    public static func encode(_ object: JSONObject) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a dictionary of `EventValue` cannot fail: non-finite numbers are written as 0.
        return (try? encoder.encode(object)) ?? Data("{}".utf8)
    }

    /// The object `data` holds; nil when it is not one.
    public static func object(_ data: Data) -> JSONObject? { try? JSONDecoder().decode(JSONObject.self, from: data) }
}

extension EventValue {
    /// The value as `--set` takes it: a string as is, anything else as JSON.
    public var settingText: String {
        switch self {
        case .string(let s): s
        case .bool(let b): b ? "true" : "false"
        case .int(let i): String(i)
        case .number(let d): d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d)
        case .list, .object:
            String(decoding: (try? JSONEncoder().encode(self)) ?? Data(), as: UTF8.self)
        }
    }
}
