import Foundation

/// The name of one queued hook: `TIME-COUNTER-SESSION-DELIVERY.json`, the time in nanoseconds (19
/// digits) and a counter (6) first, so that sorting a session's files is the order of its events,
/// across restarts too. Files an older serve queued (`TIME-COUNTER-DELIVERY.json`) name no session:
/// they are delivered as a lane of their own.
public struct HookFile: Sendable, Equatable, Comparable {
    public let name: String

    public init?(name: String) {
        guard name.hasSuffix(".json"), name.count >= 68, name.prefix(19).allSatisfy(\.isNumber) else { return nil }
        self.name = name
    }

    public init(nanoseconds: UInt64, counter: Int, session: String, delivery: String) {
        name = String(format: "%019llu-%06d-", nanoseconds, counter % 1_000_000) + Self.lane(session) + "-" + delivery + ".json"
    }

    /// The session's part of a name: letters, digits, `.` and `_` (a `-` would blur where it ends).
    static func lane(_ session: String) -> String {
        let kept = String(session.unicodeScalars.prefix(64).map { s in
            s.isASCII && (CharacterSet.alphanumerics.contains(s) || s == "." || s == "_") ? Character(s) : "_"
        })
        return kept.isEmpty ? "_" : kept
    }

    private var stem: Substring { name.dropLast(5) }

    /// When it was queued, seconds since 1970.
    public var queuedAt: Double { Double(name.prefix(19)).map { $0 / 1e9 } ?? 0 }
    /// `X-Avgraph-Delivery`: the same on every attempt, so a receiver can drop a repeat.
    public var delivery: String { String(stem.suffix(36)) }
    /// The session whose events these are ("" for an older serve's file).
    public var session: String { String(stem.dropFirst(27).dropLast(37)) }

    public static func < (a: HookFile, b: HookFile) -> Bool { a.name < b.name }
}
