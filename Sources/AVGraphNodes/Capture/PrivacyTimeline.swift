import AVGraph
import Foundation

/// In-band privacy switches of one ingest source, in the producer's time: "on (card) from T",
/// "off from T". Each picture pushed after a switch is marked with the state that holds at its
/// own timestamp, so the `privacy` node covers exactly the pictures with time >= T. A switch
/// without a time holds from the next picture pushed. Producers push from any thread.
final class PrivacyTimeline: @unchecked Sendable {
    private struct Switch { var time: Double?; var mark: PrivacyMark }
    /// Pending switches, in the order given (a producer's in-band messages come in stream order).
    private var pending: [Switch] = []
    private var current: PrivacyMark?
    private let lock = NSLock()
    /// A producer that keeps switching without sending pictures must not grow memory.
    static let maxPending = 1024

    func schedule(on: Bool, card: String?, time: Double?) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard pending.count < Self.maxPending, time?.isFinite ?? true else { return false }
        pending.append(Switch(time: time, mark: PrivacyMark(on: on, card: card)))
        return true
    }

    /// The state for a picture at producer time `time` (nil: it carries none): every pending
    /// switch at or before it takes effect, in order.
    func mark(at time: Double?) -> PrivacyMark? {
        lock.lock()
        defer { lock.unlock() }
        guard !pending.isEmpty else { return current }
        var kept: [Switch] = []
        for s in pending {
            if let t = s.time, let time, t > time { kept.append(s); continue }
            current = s.mark
        }
        pending = kept
        return current
    }
}
