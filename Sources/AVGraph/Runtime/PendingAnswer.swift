import Dispatch
import Synchronization

/// What a control request comes to: its reply, or the refusal the client reads.
typealias ControlOutcome = Result<any ControlReplyBody, ControlRefusal>

/// The answer to one control request that the run gives later (a node takes a change, or
/// answers its own command, on its own thread), decided once: by that answer or by a timeout,
/// whichever comes first. Nothing waits for it: the decision is handed to `deliver` on the thread
/// that made it, so an async caller parks no thread, and a waiting caller (the control socket's
/// client thread) waits on its own lock.
final class PendingAnswer: Sendable {
    private let deliver: Mutex<(@Sendable (ControlOutcome) -> Void)?>

    init(_ deliver: @escaping @Sendable (ControlOutcome) -> Void) { self.deliver = Mutex(deliver) }

    /// Hands `outcome` on unless the answer was decided already; true when this decided it.
    @discardableResult
    func settle(_ outcome: ControlOutcome) -> Bool {
        guard let deliver = deliver.withLock({ d in defer { d = nil }; return d }) else { return false }
        deliver(outcome)
        return true
    }

    /// Decides with `outcome()` after `seconds`, unless the run answered first (on Dispatch's
    /// timer: no thread waits meanwhile).
    func timeOut(after seconds: Double, _ outcome: @escaping @Sendable () -> ControlOutcome) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in settle(outcome()) }
    }

    /// `handle`'s outcome for a caller that has a thread to wait with (the control socket's).
    static func waiting(_ handle: (@escaping @Sendable (ControlOutcome) -> Void) -> Void) -> ControlOutcome {
        let box = ConditionLock<ControlOutcome?>(nil)
        handle { outcome in box.withLockWakingAll { $0 = outcome } }
        // Every request is decided: at once, by the run, or by its timeout.
        return box.wait { $0 }!
    }
}
