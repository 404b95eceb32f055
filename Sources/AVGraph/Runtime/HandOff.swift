import Foundation

/// The bounded hand-off of media from one thread to another (an ingest producer to its source
/// node, a network reader to its decoder). Items fall into lanes (video, audio), each with its
/// own bound measured as the caller likes (a count, bytes, seconds) and its own policy when
/// full. The reader sleeps on a `ConditionLock` and wakes on what it waits for: an item, the end,
/// a `wake()` (a stop, a change elsewhere) or its own deadline; it never polls.
public final class HandOff<Item: Sendable>: Sendable {
    public enum Policy: Sendable {
        /// The producer waits for room (or for a stop).
        case block
        /// The oldest queued item of the lane makes room (lowest latency).
        case dropOldest
        /// The new item is refused.
        case dropNewest
    }

    public struct Bound: Sendable {
        public var limit: Double
        public var policy: Policy
        public init(_ limit: Double, _ policy: Policy) {
            self.limit = limit
            self.policy = policy
        }
    }

    public enum Next: Sendable {
        case item(Item)
        /// The producer ended and everything queued was taken, or the hand-off was stopped.
        case ended
        /// `wake()` was called: something the reader also watches changed.
        case woken
        /// The reader's own deadline passed.
        case deadline
    }

    private struct State {
        /// Taken slots are set to nil at once: a consumed picture must go back to its pool now.
        var items: [Item?] = []
        var head = 0
        var used: [Double]
        var ended = false
        var stopped = false
        /// Counts wakes for producers waiting for room; `wakePending` holds one for the reader
        /// until it next looks, so a wake while it was busy is not lost.
        var wakeups = 0
        var wakePending = false
        var dropped: [Int]
    }

    private let state: ConditionLock<State>
    private let bounds: [Bound]
    private let measure: @Sendable (Item) -> (lane: Int, cost: Double)

    /// `measure` names an item's lane (an index into `bounds`) and what it costs against the bound.
    public init(bounds: [Bound], measure: @escaping @Sendable (Item) -> (lane: Int, cost: Double)) {
        self.bounds = bounds
        self.measure = measure
        var initial = State(used: Array(repeating: 0, count: bounds.count), dropped: Array(repeating: 0, count: bounds.count))
        initial.items.reserveCapacity(64)
        state = ConditionLock(initial)
    }

    /// Whether an item of `cost` on `lane` would be taken now without waiting (checked before
    /// copying one).
    public func hasRoom(lane: Int, cost: Double) -> Bool {
        state.withLock { s in !s.ended && !s.stopped && (fits(s, lane, cost) || bounds[lane].policy == .dropOldest) }
    }

    /// Waits until `lane` has room for `cost`, the hand-off ends, stops or is woken, or monotonic
    /// `deadline` passes; true when there is room.
    public func waitForRoom(lane: Int, cost: Double, until deadline: Double) -> Bool {
        var seen: Int?
        let room = state.wait(until: deadline) { s -> Bool? in
            if seen == nil { seen = s.wakeups }
            if fits(s, lane, cost) { return !s.ended && !s.stopped }
            if s.ended || s.stopped || s.wakeups != seen { return false }
            return nil
        }
        return room ?? false
    }

    /// Queues `item`; false when it was refused (by policy, or after `end`/`stop`). A `.block`
    /// lane waits for room; every other lane never waits.
    @discardableResult
    public func push(_ item: Item) -> Bool {
        let (lane, cost) = measure(item)
        var evicted: [Item] = []
        // Evicted items are released after the lock is let go.
        defer { evicted.removeAll() }
        return state.wait(wakingOthers: { $0 }) { s -> Bool? in
            while !s.ended && !s.stopped && !fits(s, lane, cost) {
                switch bounds[lane].policy {
                case .block:
                    return nil
                case .dropNewest:
                    s.dropped[lane] += 1
                    return false
                case .dropOldest:
                    guard let old = removeOldest(&s, lane: lane) else {
                        s.used[lane] = 0  // rounding left a remainder with nothing queued
                        continue
                    }
                    evicted.append(old)
                    s.dropped[lane] += 1
                }
            }
            if s.ended || s.stopped { s.dropped[lane] += 1; return false }
            s.items.append(item)
            s.used[lane] += cost
            return true
        }!
    }

    /// An item refused before it was offered (no room to copy it into) still counts as a drop.
    public func noteDropped(lane: Int) {
        state.withLock { $0.dropped[lane] += 1 }
    }

    /// The producer is done: the reader gets `.ended` once the queue is empty.
    public func end() {
        state.withLockWakingAll { $0.ended = true }
    }

    /// Nobody will read any more (stopped, failed): waits end at once, pushes are refused.
    public func stop() {
        state.withLockWakingAll { $0.stopped = true }
    }

    /// Wakes the reader (and producers waiting for room) once: something they watch changed.
    public func wake() {
        state.withLockWakingAll {
            $0.wakeups &+= 1
            $0.wakePending = true
        }
    }

    /// The oldest item, waiting for one, the end, a `wake()` or monotonic `deadline` (nil: no deadline).
    public func next(until deadline: Double? = nil) -> Next {
        // Taking an item makes room a producer may be waiting for.
        let next = state.wait(until: deadline, wakingOthers: { if case .item = $0 { true } else { false } }) { s -> Next? in
            if s.stopped { return .ended }
            if s.head < s.items.count { return .item(take(&s)) }
            if s.ended { return .ended }
            if s.wakePending { s.wakePending = false; return .woken }
            return nil
        }
        return next ?? .deadline
    }

    /// The oldest item if one is queued, without waiting.
    public func poll() -> Item? {
        state.withLockWakingAll { s in s.head < s.items.count ? take(&s) : nil }
    }

    /// Empties the queue, handing back what was in it (the caller releases it).
    public func removeAll() -> [Item] {
        state.withLockWakingAll { s in
            let rest = s.items[s.head...].compactMap { $0 }
            s.items.removeAll()
            s.head = 0
            s.used = s.used.map { _ in 0 }
            return rest
        }
    }

    /// Items refused or evicted so far, per lane.
    public var drops: [Int] { state.withLock { $0.dropped } }

    /// Neither ended nor stopped: pushes may still be taken.
    public var isOpen: Bool { state.withLock { !$0.ended && !$0.stopped } }

    public var count: Int { state.withLock { $0.items.count - $0.head } }

    // MARK: under the lock

    /// An item that costs nothing (a marker between the media, such as a session's start or end)
    /// always fits: refusing it would lose what the reader needs to know, not memory.
    private func fits(_ s: State, _ lane: Int, _ cost: Double) -> Bool {
        cost == 0 || s.used[lane] == 0 || s.used[lane] + cost <= bounds[lane].limit + 1e-9
    }

    private func take(_ s: inout State) -> Item {
        let item = s.items[s.head]!
        s.items[s.head] = nil
        s.head += 1
        if s.head > 64 && s.head * 2 > s.items.count {
            s.items.removeFirst(s.head)
            s.head = 0
        }
        let (lane, cost) = measure(item)
        s.used[lane] = max(0, s.used[lane] - cost)
        return item
    }

    private func removeOldest(_ s: inout State, lane: Int) -> Item? {
        guard let i = s.items[s.head...].firstIndex(where: { $0.map { measure($0).lane == lane } ?? false }) else { return nil }
        let item = s.items.remove(at: i)!
        s.used[lane] = max(0, s.used[lane] - measure(item).cost)
        return item
    }
}
