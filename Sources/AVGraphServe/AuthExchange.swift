import AVGraph
import Foundation

/// `--auth URL`: the question serve POSTs before admitting a publish, and what it makes of the
/// answer. Pure, so the decisions are tested without a backend.
public enum AuthExchange {
    public static let timeout = 2.0

    public enum Verdict: Sendable, Equatable {
        /// Admitted, with the backend's `set` as `--set` arguments (sorted by option).
        case admitted([String])
        case refused(String)
    }

    /// `{action, protocol, app, key, peer, query}`.
    public static func question(scheme: String, app: String, key: String, peer: String, query: String) -> Data {
        ServeJSON.encode(["action": .string("publish"), "protocol": .string(scheme), "app": .string(app), "key": .string(key),
                          "peer": .string(peer), "query": .string(query)])
    }

    /// Failing closed: anything but a 2xx is a refusal; a 2xx admits, its `{"set": {...}}` (if
    /// the body is an object that has one) overriding options of that run.
    public static func verdict(status: Int?, body: Data, described: String) -> Verdict {
        guard let status, (200..<300).contains(status) else { return .refused(described) }
        guard !body.isEmpty, let answer = ServeJSON.object(body), case .object(let sets)? = answer["set"] else { return .admitted([]) }
        return .admitted(sets.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.settingText)" })
    }
}
