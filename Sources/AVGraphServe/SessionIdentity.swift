import AVGraph
import Foundation

/// Who a session is, as its hooks and the index say it.
public struct SessionIdentity: Sendable, Equatable {
    public var id: String, key: String, app: String, scheme: String, peer: String
    public init(id: String, key: String, app: String, scheme: String, peer: String) {
        self.id = id; self.key = key; self.app = app; self.scheme = scheme; self.peer = peer
    }

    /// A hook's body: `fields` on top of the session's own (event, session, key, app, protocol,
    /// peer, time).
    public func hook(_ event: String, _ fields: JSONObject = [:], at date: Date = Date()) -> JSONObject {
        var body: JSONObject = ["event": .string(event), "session": .string(id), "key": .string(key), "app": .string(app),
                                "protocol": .string(scheme), "peer": .string(peer), "time": .string(Self.time(date))]
        for (k, v) in fields { body[k] = v }
        return body
    }

    /// UTC, ISO 8601 with milliseconds.
    public static func time(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: date)
    }
}
