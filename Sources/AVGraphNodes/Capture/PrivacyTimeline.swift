import AVGraph
import Foundation
import Synchronization

/// In-band privacy switches of one ingest source, in the producer's time: "on (card) from T",
/// "off from T". Each picture pushed after a switch is marked with the state that holds at its
/// own timestamp, so the `privacy` node covers exactly the pictures with time >= T. A switch
/// without a time holds from the next picture pushed. Producers push from any thread.
final class PrivacyTimeline: Sendable {
    private struct Switch { var time: Double?; var mark: PrivacyMark }
    private struct Switches {
        /// Pending switches, in the order given (a producer's in-band messages come in stream order).
        var pending: [Switch] = []
        var current: PrivacyMark?
    }
    private let switches = Mutex(Switches())
    /// A producer that keeps switching without sending pictures must not grow memory.
    static let maxPending = 1024

    func schedule(on: Bool, card: String?, time: Double?) -> Bool {
        switches.withLock { s in
            guard s.pending.count < Self.maxPending, time?.isFinite ?? true else { return false }
            s.pending.append(Switch(time: time, mark: PrivacyMark(on: on, card: card)))
            return true
        }
    }

    /// The state for a picture at producer time `time` (nil: it carries none): every pending
    /// switch at or before it takes effect, in order.
    func mark(at time: Double?) -> PrivacyMark? {
        switches.withLock { all in
            guard !all.pending.isEmpty else { return all.current }
            var kept: [Switch] = []
            for s in all.pending {
                if let t = s.time, let time, t > time { kept.append(s); continue }
                all.current = s.mark
            }
            all.pending = kept
            return all.current
        }
    }
}
