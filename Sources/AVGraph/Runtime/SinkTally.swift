import Foundation

/// What one sink received over a run (bytes, video frames, media span), for `eos` and the exit
/// line: a run whose sinks got nothing did not record anything, whatever else happened.
final class SinkTally: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes = 0
    private var frames = 0
    private var first: Int64?
    private var end: Int64 = 0

    func count(_ buffer: MediaBuffer, kind: MediaKind) {
        let t = buffer.time
        let length: Int64
        switch buffer {
        case .frame(let f): length = max(f.duration, 0)
        case .packet(let p): length = max(Rational.rescale(p.av.pointee.duration, from: p.timeBase, to: Rational(1, 1_000_000)), 0)
        }
        lock.lock()
        defer { lock.unlock() }
        bytes += buffer.byteCount
        if kind.isVideo { frames += 1 }
        if first == nil || t < first! { first = t }
        end = max(end, t + length)
    }

    func summary(node: String) -> Event.SinkSummary {
        lock.lock()
        defer { lock.unlock() }
        let span = first.map { Double(max(end - $0, 0)) / 1e6 } ?? 0
        return Event.SinkSummary(node: node, bytes: bytes, mediaDuration: (span * 1000).rounded() / 1000, frames: frames)
    }
}
