import Foundation

/// The bounded hand-off of media from one thread to another (an ingest producer to its source
/// node, a network reader to its decoder). Items fall into lanes (video, audio), each with its
/// own bound measured as the caller likes (a count, bytes, seconds) and its own policy when
/// full. The reader sleeps on the condition and wakes on what it waits for: an item, the end,
/// a `wake()` (a stop, a change elsewhere) or its own deadline; it never polls.
public final class HandOff<Item>: @unchecked Sendable {
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

    public enum Next {
        case item(Item)
        /// The producer ended and everything queued was taken, or the hand-off was stopped.
        case ended
        /// `wake()` was called: something the reader also watches changed.
        case woken
        /// The reader's own deadline passed.
        case deadline
    }

    private let condition = NSCondition()
    /// Taken slots are set to nil at once: a consumed picture must go back to its pool now.
    private var items: [Item?] = []
    private var head = 0
    private var used: [Double]
    private let bounds: [Bound]
    private let measure: (Item) -> (lane: Int, cost: Double)
    private var ended = false
    private var stopped = false
    /// Counts wakes for producers waiting for room; `wakePending` holds one for the reader
    /// until it next looks, so a wake while it was busy is not lost.
    private var wakeups = 0
    private var wakePending = false
    private var dropped: [Int]

    /// `measure` names an item's lane (an index into `bounds`) and what it costs against the bound.
    public init(bounds: [Bound], measure: @escaping (Item) -> (lane: Int, cost: Double)) {
        self.bounds = bounds
        self.measure = measure
        used = Array(repeating: 0, count: bounds.count)
        dropped = Array(repeating: 0, count: bounds.count)
        items.reserveCapacity(64)
    }

    /// Whether an item of `cost` on `lane` would be taken now without waiting (checked before
    /// copying one).
    public func hasRoom(lane: Int, cost: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return !ended && !stopped && (fits(lane, cost) || bounds[lane].policy == .dropOldest)
    }

    /// Waits until `lane` has room for `cost`, the hand-off ends, stops or is woken, or monotonic
    /// `deadline` passes; true when there is room.
    public func waitForRoom(lane: Int, cost: Double, until deadline: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let seen = wakeups
        while !fits(lane, cost) {
            if ended || stopped || wakeups != seen { return false }
            if !condition.wait(until: Self.date(deadline)) { return fits(lane, cost) }
        }
        return !ended && !stopped
    }

    /// Queues `item`; false when it was refused (by policy, or after `end`/`stop`). A `.block`
    /// lane waits for room; every other lane never waits.
    @discardableResult
    public func push(_ item: Item) -> Bool {
        let (lane, cost) = measure(item)
        var evicted: [Item] = []
        condition.lock()
        defer {
            condition.unlock()
            evicted.removeAll()  // released outside the lock
        }
        while !ended && !stopped && !fits(lane, cost) {
            switch bounds[lane].policy {
            case .block:
                condition.wait()
            case .dropNewest:
                dropped[lane] += 1
                return false
            case .dropOldest:
                guard let old = removeOldest(lane: lane) else {
                    used[lane] = 0  // rounding left a remainder with nothing queued
                    continue
                }
                evicted.append(old)
                dropped[lane] += 1
            }
        }
        if ended || stopped { dropped[lane] += 1; return false }
        items.append(item)
        used[lane] += cost
        condition.broadcast()
        return true
    }

    /// An item refused before it was offered (no room to copy it into) still counts as a drop.
    public func noteDropped(lane: Int) {
        condition.lock()
        dropped[lane] += 1
        condition.unlock()
    }

    /// The producer is done: the reader gets `.ended` once the queue is empty.
    public func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// Nobody will read any more (stopped, failed): waits end at once, pushes are refused.
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// Wakes the reader (and producers waiting for room) once: something they watch changed.
    public func wake() {
        condition.lock()
        wakeups &+= 1
        wakePending = true
        condition.broadcast()
        condition.unlock()
    }

    /// The oldest item, waiting for one, the end, a `wake()` or monotonic `deadline` (nil: no deadline).
    public func next(until deadline: Double? = nil) -> Next {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if stopped { return .ended }
            if head < items.count { return .item(take()) }
            if ended { return .ended }
            if wakePending { wakePending = false; return .woken }
            if let deadline {
                if !condition.wait(until: Self.date(deadline)) && head == items.count && !ended && !stopped && !wakePending {
                    return .deadline
                }
            } else {
                condition.wait()
            }
        }
    }

    /// The oldest item if one is queued, without waiting.
    public func poll() -> Item? {
        condition.lock()
        defer { condition.unlock() }
        return head < items.count ? take() : nil
    }

    /// Empties the queue, handing back what was in it (the caller releases it).
    public func removeAll() -> [Item] {
        condition.lock()
        defer { condition.unlock() }
        let rest = items[head...].compactMap { $0 }
        items.removeAll()
        head = 0
        used = used.map { _ in 0 }
        condition.broadcast()
        return rest
    }

    /// Items refused or evicted so far, per lane.
    public var drops: [Int] {
        condition.lock()
        defer { condition.unlock() }
        return dropped
    }

    /// Neither ended nor stopped: pushes may still be taken.
    public var isOpen: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !ended && !stopped
    }

    public var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return items.count - head
    }

    // MARK: under `condition`

    /// An item that costs nothing (a marker between the media, such as a session's start or end)
    /// always fits: refusing it would lose what the reader needs to know, not memory.
    private func fits(_ lane: Int, _ cost: Double) -> Bool {
        cost == 0 || used[lane] == 0 || used[lane] + cost <= bounds[lane].limit + 1e-9
    }

    private func take() -> Item {
        let item = items[head]!
        items[head] = nil
        head += 1
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        let (lane, cost) = measure(item)
        used[lane] = max(0, used[lane] - cost)
        condition.broadcast()
        return item
    }

    private func removeOldest(lane: Int) -> Item? {
        guard let i = items[head...].firstIndex(where: { $0.map { measure($0).lane == lane } ?? false }) else { return nil }
        let item = items.remove(at: i)!
        used[lane] = max(0, used[lane] - measure(item).cost)
        return item
    }

    private static func date(_ monotonicDeadline: Double) -> Date {
        Date(timeIntervalSinceNow: max(0, monotonicDeadline - Monotonic.now))
    }
}
