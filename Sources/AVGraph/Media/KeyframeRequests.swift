import Synchronization

/// A way back from the sinks to the encoder whose packets they carry: a viewer that lost a
/// picture or has just joined asks for a keyframe (WebRTC's PLI and FIR). Requests are
/// coalesced: whatever the number of viewers asking, the encoder makes at most one keyframe per
/// `interval`. It travels with the encoder's `EncodedStream`; safe from any thread.
public final class KeyframeRequests: Sendable {
    private struct State {
        var pending = false
        var lastGranted = -Double.infinity
    }

    private let state = Mutex(State())
    public let interval: Double

    public init(interval: Double = 1) { self.interval = interval }

    /// A sink wants a keyframe soon.
    public func request() { state.withLock { $0.pending = true } }

    /// The encoder, for each picture: whether to make this one a keyframe (a request is pending
    /// and the last granted one was at least `interval` ago). `now`: monotonic seconds.
    public func take(now: Double = UplinkFeedback.now) -> Bool {
        state.withLock { s in
            guard s.pending, now - s.lastGranted >= interval else { return false }
            s.pending = false
            s.lastGranted = now
            return true
        }
    }

    /// The encoder made a keyframe of its own: it answers what is pending.
    public func keyframeMade(now: Double = UplinkFeedback.now) {
        state.withLock { s in
            if s.pending { s.pending = false; s.lastGranted = now }
        }
    }
}
