import Foundation
import Synchronization

/// What one sink received over a run (bytes, video frames, media span), for `eos` and the exit
/// line: a run whose sinks got nothing did not record anything, whatever else happened.
/// Counted on the sink's thread, read by the run's thread.
final class SinkTally: Sendable {
    private struct Counts {
        var bytes = 0
        var frames = 0
        var first: Int64?
        var end: Int64 = 0
    }
    private let counts = Mutex(Counts())

    func count(_ buffer: MediaBuffer, kind: MediaKind) {
        let t = buffer.time
        let length: Int64
        switch buffer {
        case .frame(let f): length = max(f.duration, 0)
        case .packet(let p): length = max(Rational.rescale(p.av.pointee.duration, from: p.timeBase, to: Rational(1, 1_000_000)), 0)
        }
        let bytes = buffer.byteCount
        counts.withLock { c in
            c.bytes += bytes
            if kind.isVideo { c.frames += 1 }
            if c.first == nil || t < c.first! { c.first = t }
            c.end = max(c.end, t + length)
        }
    }

    func summary(node: String) -> Event.SinkSummary {
        let c = counts.withLock { $0 }
        let span = c.first.map { Double(max(c.end - $0, 0)) / 1e6 } ?? 0
        return Event.SinkSummary(node: node, bytes: c.bytes, mediaDuration: (span * 1000).rounded() / 1000, frames: c.frames)
    }
}
