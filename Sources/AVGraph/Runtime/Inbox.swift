import Foundation
import Synchronization

/// The input side of one node: one bounded lane per incoming connection, all behind one
/// `ConditionLock` so the node can wait for "anything on any input". Producers block (offline) or
/// drop by the lane's policy (live) when a lane is full.
final class Inbox: Sendable {
    /// What a lane is: fixed when the run is built.
    struct Lane: Sendable {
        let capacity: Int
        let policy: QueuePolicy
        let kind: MediaKind

        init(capacity: Int, policy: QueuePolicy, kind: MediaKind) {
            self.capacity = capacity
            self.policy = policy
            self.kind = kind
        }
    }

    /// What a lane holds; under the lock.
    private struct Queue {
        var items: [MediaBuffer] = []
        var ended = false
        var endDelivered = false
        var dropped = 0
        var waitingForKeyframe = false
        var count: Int { items.count }

        /// Lanes are short (capacity ~8): removing the item outright is cheap, and a popped
        /// frame must not stay referenced here, or its pooled picture never returns to the pool.
        mutating func pop() -> MediaBuffer { items.removeFirst() }

        mutating func dropOldest() -> MediaBuffer? { count > 0 ? pop() : nil }
    }

    private struct State {
        var queues: [Queue]
        /// The consumer is gone (failed): producers must not wait for it.
        var closed = false
        /// `poke` asked the consumer to look at something else.
        var poked = false
    }

    enum Next {
        case item(Int, MediaBuffer)
        case ended(Int)
        case allEnded
        /// The deadline passed, or `poke` asked the consumer to look at something else (a change).
        case timeout
    }

    let lanes: [Lane]
    private let state: ConditionLock<State>
    let memory: MemoryBudget

    init(lanes: [Lane], memory: MemoryBudget) {
        self.lanes = lanes
        self.memory = memory
        state = ConditionLock(State(queues: lanes.map { _ in Queue() }))
    }

    /// Puts `item` on lane `i`; returns false when it was dropped.
    @discardableResult
    func push(_ item: MediaBuffer, lane i: Int, stopping: () -> Bool) -> Bool {
        let lane = lanes[i]
        let memory = memory
        // Tried again each time the consumer takes an item, `close`, or the run stops (`wake`);
        // woken consumers look at what was added.
        return state.wait(wakingOthers: { $0 }) { s -> Bool? in
            if s.closed { s.queues[i].dropped += 1; return false }
            if s.queues[i].waitingForKeyframe {
                if let p = item.packet, p.isKeyframe { s.queues[i].waitingForKeyframe = false } else { s.queues[i].dropped += 1; return false }
            }
            // Over the memory budget, video gives way first so audio never has to.
            if memory.isOver && lane.kind.isVideo && lane.policy != .block {
                s.queues[i].dropped += 1
                if lane.kind == .encodedVideo { s.queues[i].waitingForKeyframe = true }
                return false
            }
            while s.queues[i].count >= lane.capacity {
                switch lane.policy {
                case .block:
                    if stopping() && s.queues[i].count >= lane.capacity * 4 { s.queues[i].dropped += 1; return false }
                    return nil
                case .dropNewest:
                    s.queues[i].dropped += 1
                    return false
                case .dropOldest:
                    if let old = s.queues[i].dropOldest() { memory.release(old) }
                    s.queues[i].dropped += 1
                case .dropToKeyframe:
                    // Drop everything queued and wait for the next keyframe: the decoder never sees a broken chain.
                    while let old = s.queues[i].dropOldest() { memory.release(old); s.queues[i].dropped += 1 }
                    if let p = item.packet, !p.isKeyframe {
                        s.queues[i].waitingForKeyframe = true
                        s.queues[i].dropped += 1
                        return false
                    }
                }
            }
            s.queues[i].items.append(item)
            memory.add(item)
            return true
        }!
    }

    func end(lane i: Int) {
        state.withLockWakingAll { $0.queues[i].ended = true }
    }

    /// Wakes producers waiting on a full lane: the run is stopping.
    func wake() { state.wakeAll() }

    /// Ends the consumer's current wait in `next` (with `.timeout`) even though nothing arrived:
    /// a live change waits for it, and a node without deadlines otherwise sleeps until media comes.
    func poke() {
        state.withLockWakingAll { $0.poked = true }
    }

    func close() {
        let memory = memory
        state.withLockWakingAll { s in
            s.closed = true
            for i in s.queues.indices { while let old = s.queues[i].dropOldest() { memory.release(old) } }
        }
    }

    /// Everything queued on lane `i`, taken at once (a test harness's collector).
    func takeAll(lane i: Int) -> [MediaBuffer] {
        let memory = memory
        return state.withLock { s in
            defer { s.queues[i].items.removeAll() }
            for item in s.queues[i].items { memory.release(item) }
            return s.queues[i].items
        }
    }

    /// The next thing for the consumer: an item from the oldest-timed lane it wants, a lane's end,
    /// or `timeout` after `timeout` seconds of nothing (realtime ticks).
    func next(wants: (Int) -> Bool, timeout: Double?) -> Next {
        let deadline = timeout.map { Monotonic.now + $0 }
        // Taking an item makes room a producer may be waiting for.
        let next = state.wait(until: deadline, wakingOthers: { if case .item = $0 { true } else { false } }) { s in
            take(&s, wants: wants)
        }
        return next ?? .timeout
    }

    /// What `next` would give now, or nil instead of waiting (a node run on its producers' thread,
    /// whose producers are done for this turn).
    func poll(wants: (Int) -> Bool) -> Next? {
        let next = state.withLock { s in take(&s, wants: wants) }
        if case .item = next { state.wakeAll() }
        return next
    }

    /// The next thing on the lanes, taken, or nil: nothing yet.
    private func take(_ s: inout State, wants: (Int) -> Bool) -> Next? {
        var best: Int?
        var bestTime = Int64.max
        for (i, queue) in s.queues.enumerated() where queue.count > 0 && wants(i) {
            let t = queue.items[0].time
            if t < bestTime { bestTime = t; best = i }
        }
        if best == nil {
            // A lane nobody wants right now still has to drain at its end, or the run could stall.
            for (i, queue) in s.queues.enumerated() where queue.count > 0 && s.queues.allSatisfy({ $0.count > 0 || $0.ended }) {
                best = i
                break
            }
        }
        if let i = best {
            let item = s.queues[i].pop()
            memory.release(item)
            return .item(i, item)
        }
        for i in s.queues.indices where s.queues[i].ended && s.queues[i].count == 0 && !s.queues[i].endDelivered {
            s.queues[i].endDelivered = true
            return .ended(i)
        }
        if s.queues.allSatisfy({ $0.endDelivered }) { return .allEnded }
        if s.poked {
            s.poked = false
            return .timeout
        }
        return nil
    }

    var depths: [Int] { state.withLock { $0.queues.map(\.count) } }

    func depth(lane i: Int) -> Int { state.withLock { $0.queues[i].count } }

    /// Waits until lane `i` holds at most `depth` items (the consumer took the rest: taking wakes
    /// this), the inbox closes, or monotonic `deadline` passes.
    func waitForDepth(lane i: Int, atMost depth: Int, until deadline: Double) {
        _ = state.wait(until: deadline) { s -> Bool? in s.closed || s.queues[i].count <= depth ? true : nil }
    }

    var drops: [Int] { state.withLock { $0.queues.map(\.dropped) } }

    var laneFigures: [(kind: MediaKind, depth: Int, capacity: Int, dropped: Int)] {
        state.withLock { s in zip(lanes, s.queues).map { ($0.kind, $1.count, $0.capacity, $1.dropped) } }
    }

    var dropsByKind: [MediaKind: Int] {
        state.withLock { s in
            var d: [MediaKind: Int] = [:]
            for (lane, queue) in zip(lanes, s.queues) where queue.dropped > 0 { d[lane.kind, default: 0] += queue.dropped }
            return d
        }
    }
}

/// Bytes of media queued on all edges, against the pipeline's `memory-limit`. A buffer queued
/// more than once (a picture fanned out to several consumers, repeats of one picture) is counted
/// once: the budget is memory, and references share it.
@_spi(Testing) public final class MemoryBudget: Sendable {
    private struct Counted {
        var bytes = 0
        /// Each queued buffer: how many queued items refer to it, and the bytes it was counted for.
        var queued: [OpaquePointer: (references: Int, bytes: Int)] = [:]
    }
    /// A leaf lock: taken under an inbox's lock, it never takes another.
    private let counted = Mutex(Counted())
    public let limit: Int

    public init(limit: Int) { self.limit = limit }

    /// Memory a node holds itself (a sink's send buffer, the clip window), not in any queue:
    /// `delta` more bytes, or fewer when negative.
    public func hold(_ delta: Int) { counted.withLock { $0.bytes += delta } }

    /// `item` went into a queue.
    public func add(_ item: MediaBuffer) {
        counted.withLock { c in
            item.forEachBuffer { buffer, size in
                if let q = c.queued[buffer] {
                    c.queued[buffer] = (q.references + 1, q.bytes)
                } else {
                    c.queued[buffer] = (1, size)
                    c.bytes += size
                }
            }
        }
    }

    /// `item` left its queue (taken or dropped).
    public func release(_ item: MediaBuffer) {
        counted.withLock { c in
            item.forEachBuffer { buffer, _ in
                guard let q = c.queued[buffer] else { return }
                if q.references > 1 {
                    c.queued[buffer] = (q.references - 1, q.bytes)
                } else {
                    c.queued[buffer] = nil
                    c.bytes -= q.bytes
                }
            }
        }
    }

    public var used: Int { counted.withLock { $0.bytes } }
    public var isOver: Bool { used > limit }
}
