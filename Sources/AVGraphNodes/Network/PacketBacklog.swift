import AVGraph
import CFFmpeg
import Foundation
import Synchronization

/// Compressed packets between a network reader and its decoder: a `HandOff` bounded by bytes.
/// Past the limit (the pipeline far behind) packets are dropped, video up to the next keyframe,
/// which `push` says (the source counts them as its own, as a full picture queue's).
/// One producer (the reader thread) pushes; the keyframe state is that thread's alone.
final class PacketBacklog: Sendable {
    // @unchecked: an AVPacket pointer is not Sendable; a queued packet is the hand-off's, then the decoder's that takes it.
    enum Item: @unchecked Sendable {
        case begin(SessionDecoding)
        /// The session's stream ended: its decoders give up what they hold.
        case end(session: Int)
        case packet(UnsafeMutablePointer<AVPacket>, pad: Int)
    }

    private let handOff: HandOff<Item>
    /// The reader thread's alone (a Mutex nobody else takes).
    private let dropping = Mutex((videoWaitsForKeyframe: false, overflowing: false))
    /// Items pushed that the decoder has not finished with: while there are any, a packet the
    /// reader handled itself would overtake them.
    private let unfinished = Atomic(0)
    /// Bytes of packets it holds at most.
    let limit: Int

    /// What became of a pushed packet.
    enum Pushed: Equatable {
        case taken
        /// Dropped; `first` of the publisher's session (worth one warning; the rest are counted).
        case dropped(first: Bool)
    }

    init(limit: Int) {
        self.limit = limit
        handOff = HandOff(bounds: [.init(Double(limit), .dropNewest)]) { item in
            guard case .packet(let p, _) = item else { return (0, 0) }
            return (0, Double(p.pointee.size))
        }
    }

    deinit { discard() }

    /// Takes `packet`'s reference (leaving it blank for the next read).
    func push(_ packet: UnsafeMutablePointer<AVPacket>, pad: Int) -> Pushed {
        let key = packet.pointee.flags & avg_pkt_flag_key() != 0
        if pad == 0 && dropping.withLock({ $0.videoWaitsForKeyframe }) && !key { return dropped() }
        var copy: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()!
        av_packet_move_ref(copy, packet)
        guard queue(.packet(copy!, pad: pad)) else {
            av_packet_free(&copy)
            if pad == 0 { dropping.withLock { $0.videoWaitsForKeyframe = true } }
            return dropped()
        }
        if pad == 0 { dropping.withLock { $0.videoWaitsForKeyframe = false } }
        return .taken
    }

    /// Runs `handle` on `packet` on the reader's thread instead of queuing it, when that keeps the
    /// order (nothing queued, nor being decoded) and drops nothing (video waiting for a keyframe
    /// goes through `push`); `handle` says whether it took the packet (else the caller pushes it).
    func handledByReader(_ packet: UnsafeMutablePointer<AVPacket>, pad: Int, _ handle: () -> Bool) -> Bool {
        guard unfinished.load(ordering: .acquiring) == 0 else { return false }
        if pad == 0 && dropping.withLock({ $0.videoWaitsForKeyframe }) { return false }
        return handle()
    }

    /// The decoder finished with an item it took from `next`.
    func finished() { unfinished.subtract(1, ordering: .releasing) }

    @discardableResult
    private func queue(_ item: Item) -> Bool {
        unfinished.add(1, ordering: .relaxed)
        if handOff.push(item) { return true }
        unfinished.subtract(1, ordering: .relaxed)
        return false
    }

    private func dropped() -> Pushed {
        dropping.withLock { d in
            defer { d.overflowing = true }
            return .dropped(first: !d.overflowing)
        }
    }

    /// A new publisher session: the packets after this are its own.
    func begin(_ session: SessionDecoding) {
        dropping.withLock { $0 = (false, false) }
        queue(.begin(session))
    }

    /// Session `session`'s stream ended; the packets before this are its last.
    func endSession(_ session: Int) {
        queue(.end(session: session))
    }

    /// The reader is done: the decoder takes what is queued, then ends.
    func end() { handOff.end() }

    /// The source stops: the decoder's wait ends at once, whatever is queued.
    func stop() { handOff.stop() }

    /// The oldest item (the caller frees a packet), waiting for one; nil once ended and empty, or stopped.
    func next() -> Item? {
        guard case .item(let item) = handOff.next() else { return nil }
        return item
    }

    /// Frees what is left (the decoder has stopped).
    func discard() {
        handOff.stop()
        for item in handOff.removeAll() {
            guard case .packet(let packet, _) = item else { continue }
            var p: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&p)
        }
    }
}
