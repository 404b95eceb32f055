import AVGraph
import CFFmpeg
import Foundation

/// Compressed packets between a network reader and its decoder, bounded by bytes: past the
/// limit (the pipeline far behind) packets are dropped, video up to the next keyframe.
final class PacketBacklog: @unchecked Sendable {
    enum Item {
        case begin(SessionDecoding)
        case packet(UnsafeMutablePointer<AVPacket>, pad: Int)
    }

    private let condition = NSCondition()
    private var items: [Item] = []
    private var head = 0
    private var bytes = 0
    private var ended = false
    private var videoWaitsForKeyframe = false
    private let limit: Int
    private(set) var dropped = 0

    init(limit: Int) { self.limit = limit }

    deinit { discard() }

    /// Takes `packet`'s reference (leaving it blank for the next read).
    func push(_ packet: UnsafeMutablePointer<AVPacket>, pad: Int) {
        condition.lock()
        defer { condition.unlock() }
        let key = packet.pointee.flags & avg_pkt_flag_key() != 0
        if pad == 0 && videoWaitsForKeyframe && !key { dropped += 1; return }
        if pad == 0 { videoWaitsForKeyframe = false }
        if ended || bytes + Int(packet.pointee.size) > limit {
            dropped += 1
            if pad == 0 { videoWaitsForKeyframe = true }
            return
        }
        let copy = av_packet_alloc()!
        av_packet_move_ref(copy, packet)
        bytes += Int(copy.pointee.size)
        items.append(.packet(copy, pad: pad))
        condition.signal()
    }

    /// A new publisher session: the packets after this are its own.
    func begin(_ session: SessionDecoding) {
        condition.lock()
        videoWaitsForKeyframe = false
        items.append(.begin(session))
        condition.signal()
        condition.unlock()
    }

    func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// The oldest item (the caller frees a packet), waiting for one; nil once ended and empty, or cancelled.
    func next(_ cancel: CancelFlag) -> Item? {
        condition.lock()
        defer { condition.unlock() }
        while head == items.count {
            if ended || cancel.isCancelled { return nil }
            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.1))
        }
        if cancel.isCancelled { return nil }
        let item = items[head]
        head += 1
        if head > 256 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        if case .packet(let p, _) = item { bytes -= Int(p.pointee.size) }
        return item
    }

    /// Frees what is left (the decoder has stopped).
    func discard() {
        condition.lock()
        ended = true
        for i in head..<items.count {
            guard case .packet(let packet, _) = items[i] else { continue }
            var p: UnsafeMutablePointer<AVPacket>? = packet
            av_packet_free(&p)
        }
        items.removeAll()
        head = 0
        bytes = 0
        condition.unlock()
    }
}
