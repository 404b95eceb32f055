import Foundation

/// The input side of one node: one bounded lane per incoming connection, all guarded by one
/// condition so the node can wait for "anything on any input". Producers block (offline) or
/// drop by the lane's policy (live) when a lane is full.
final class Inbox: @unchecked Sendable {
    final class Lane {
        var items: [MediaBuffer] = []
        var head = 0
        let capacity: Int
        let policy: QueuePolicy
        let kind: MediaKind
        var ended = false
        var endDelivered = false
        var dropped = 0
        var waitingForKeyframe = false
        var count: Int { items.count - head }

        init(capacity: Int, policy: QueuePolicy, kind: MediaKind) {
            self.capacity = capacity
            self.policy = policy
            self.kind = kind
        }

        func pop() -> MediaBuffer {
            // Lanes are short (capacity ~8): removing the item outright is cheap, and a popped
            // frame must not stay referenced here, or its pooled picture never returns to the pool.
            items.remove(at: head)
        }

        func dropOldest() -> MediaBuffer? { count > 0 ? pop() : nil }
    }

    enum Next {
        case item(Int, MediaBuffer)
        case ended(Int)
        case allEnded
        /// The deadline passed, or `poke` asked the consumer to look at something else (a change).
        case timeout
    }

    let condition = NSCondition()
    var lanes: [Lane]
    /// The consumer is gone (failed): producers must not wait for it.
    private var closed = false
    let memory: MemoryBudget

    init(lanes: [Lane], memory: MemoryBudget) {
        self.lanes = lanes
        self.memory = memory
    }

    /// Puts `item` on lane `i`; returns false when it was dropped.
    @discardableResult
    func push(_ item: MediaBuffer, lane i: Int, stopping: () -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let lane = lanes[i]
        if closed { lane.dropped += 1; return false }
        if lane.waitingForKeyframe {
            if let p = item.packet, p.isKeyframe { lane.waitingForKeyframe = false } else { lane.dropped += 1; return false }
        }
        // Over the memory budget, video gives way first so audio never has to.
        if memory.isOver && lane.kind.isVideo && lane.policy != .block {
            lane.dropped += 1
            if lane.kind == .encodedVideo { lane.waitingForKeyframe = true }
            return false
        }
        while lane.count >= lane.capacity {
            switch lane.policy {
            case .block:
                if closed || stopping() && lane.count >= lane.capacity * 4 { lane.dropped += 1; return false }
                // Woken by the consumer taking an item, `close`, or the run stopping (`wake`).
                condition.wait()
                if closed { lane.dropped += 1; return false }
                continue
            case .dropNewest:
                lane.dropped += 1
                return false
            case .dropOldest:
                if let old = lane.dropOldest() { memory.release(old) }
                lane.dropped += 1
            case .dropToKeyframe:
                // Drop everything queued and wait for the next keyframe: the decoder never sees a broken chain.
                while let old = lane.dropOldest() { memory.release(old); lane.dropped += 1 }
                if let p = item.packet, !p.isKeyframe {
                    lane.waitingForKeyframe = true
                    lane.dropped += 1
                    return false
                }
            }
        }
        lane.items.append(item)
        memory.add(item)
        condition.broadcast()
        return true
    }

    func end(lane i: Int) {
        condition.lock()
        lanes[i].ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// Wakes producers waiting on a full lane: the run is stopping.
    func wake() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Ends the consumer's current wait in `next` (with `.timeout`) even though nothing arrived:
    /// a live change waits for it, and a node without deadlines otherwise sleeps until media comes.
    func poke() {
        condition.lock()
        poked = true
        condition.broadcast()
        condition.unlock()
    }
    private var poked = false

    func close() {
        condition.lock()
        closed = true
        for lane in lanes { while let old = lane.dropOldest() { memory.release(old) } }
        condition.broadcast()
        condition.unlock()
    }

    /// The next thing for the consumer: an item from the oldest-timed lane it wants, a lane's end,
    /// or `timeout` after `timeout` seconds of nothing (realtime ticks).
    func next(wants: (Int) -> Bool, timeout: Double?) -> Next {
        condition.lock()
        defer { condition.unlock() }
        let deadline = timeout.map { Date(timeIntervalSinceNow: $0) }
        while true {
            var best: Int?
            var bestTime = Int64.max
            for (i, lane) in lanes.enumerated() where lane.count > 0 && wants(i) {
                let t = lane.items[lane.head].time
                if t < bestTime { bestTime = t; best = i }
            }
            if best == nil {
                // A lane nobody wants right now still has to drain at its end, or the run could stall.
                for (i, lane) in lanes.enumerated() where lane.count > 0 && lanes.allSatisfy({ $0.count > 0 || $0.ended }) {
                    best = i
                    break
                }
            }
            if let i = best {
                let item = lanes[i].pop()
                memory.release(item)
                condition.broadcast()
                return .item(i, item)
            }
            for (i, lane) in lanes.enumerated() where lane.ended && lane.count == 0 && !lane.endDelivered {
                lane.endDelivered = true
                return .ended(i)
            }
            if lanes.allSatisfy({ $0.endDelivered }) { return .allEnded }
            if poked {
                poked = false
                return .timeout
            }
            if let deadline {
                if !condition.wait(until: deadline) { return .timeout }
            } else {
                condition.wait()
            }
        }
    }

    var depths: [Int] {
        condition.lock()
        defer { condition.unlock() }
        return lanes.map(\.count)
    }

    func depth(lane i: Int) -> Int {
        condition.lock()
        defer { condition.unlock() }
        return lanes[i].count
    }

    var drops: [Int] {
        condition.lock()
        defer { condition.unlock() }
        return lanes.map(\.dropped)
    }

    var dropsByKind: [MediaKind: Int] {
        condition.lock()
        defer { condition.unlock() }
        var d: [MediaKind: Int] = [:]
        for lane in lanes where lane.dropped > 0 { d[lane.kind, default: 0] += lane.dropped }
        return d
    }
}

/// Bytes of media queued on all edges, against the pipeline's `memory-limit`. A buffer queued
/// more than once (a picture fanned out to several consumers, repeats of one picture) is counted
/// once: the budget is memory, and references share it.
@_spi(Testing) public final class MemoryBudget: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes = 0
    /// Each queued buffer: how many queued items refer to it, and the bytes it was counted for.
    private var queued: [OpaquePointer: (references: Int, bytes: Int)] = [:]
    public let limit: Int

    public init(limit: Int) { self.limit = limit }

    /// Memory a node holds itself (a sink's send buffer, the clip window), not in any queue:
    /// `delta` more bytes, or fewer when negative.
    public func hold(_ delta: Int) { lock.lock(); bytes += delta; lock.unlock() }

    /// `item` went into a queue.
    public func add(_ item: MediaBuffer) {
        lock.lock()
        defer { lock.unlock() }
        item.forEachBuffer { buffer, size in
            if let q = queued[buffer] {
                queued[buffer] = (q.references + 1, q.bytes)
            } else {
                queued[buffer] = (1, size)
                bytes += size
            }
        }
    }

    /// `item` left its queue (taken or dropped).
    public func release(_ item: MediaBuffer) {
        lock.lock()
        defer { lock.unlock() }
        item.forEachBuffer { buffer, _ in
            guard let q = queued[buffer] else { return }
            if q.references > 1 {
                queued[buffer] = (q.references - 1, q.bytes)
            } else {
                queued[buffer] = nil
                bytes -= q.bytes
            }
        }
    }

    public var used: Int { lock.lock(); defer { lock.unlock() }; return bytes }
    public var isOver: Bool { used > limit }
}
