import AVGraph
import Foundation
import XCTest

/// The one bounded hand-off between threads: its bounds and policies, and that every wait ends
/// on what it waits for (an item, room, the end, a stop, a wake), not on a poll interval.
final class HandOffTests: XCTestCase {
    /// Lane 0 counted in items, lane 1 in the item's own value (bytes, seconds).
    func queue(_ video: HandOff<(Int, Double)>.Policy, videoLimit: Double = 2, bytes: Double = 10) -> HandOff<(Int, Double)> {
        HandOff(bounds: [.init(videoLimit, video), .init(bytes, .dropNewest)]) { ($0.0, $0.0 == 0 ? 1 : $0.1) }
    }

    func values(_ q: HandOff<(Int, Double)>) -> [Double] {
        var out: [Double] = []
        while let item = q.poll() { out.append(item.1) }
        return out
    }

    func testDropNewestRefusesAndDropOldestEvictsWithinTheirLane() {
        let newest = queue(.dropNewest)
        XCTAssertTrue(newest.push((0, 1)))
        XCTAssertTrue(newest.push((0, 2)))
        XCTAssertFalse(newest.push((0, 3)))
        XCTAssertTrue(newest.push((1, 4)), "the other lane has its own bound")
        XCTAssertEqual(values(newest), [1, 2, 4])
        XCTAssertEqual(newest.drops, [1, 0])

        let oldest = queue(.dropOldest)
        oldest.push((1, 5))
        for v in 1...4 { XCTAssertTrue(oldest.push((0, Double(v)))) }
        XCTAssertEqual(values(oldest), [5, 3, 4], "video 1 and 2 made room; the audio before them stays")
        XCTAssertEqual(oldest.drops, [2, 0])
    }

    func testByteBoundCountsWhatItemsCostAndFreesItOnTake() {
        let q = queue(.dropNewest)
        XCTAssertTrue(q.push((1, 6)))
        XCTAssertFalse(q.hasRoom(lane: 1, cost: 5))
        XCTAssertFalse(q.push((1, 5)))
        XCTAssertTrue(q.push((1, 4)))
        _ = q.poll()
        XCTAssertTrue(q.hasRoom(lane: 1, cost: 5), "taking an item gives its bytes back")
    }

    func testBlockingProducerWaitsForRoomAndAStopReleasesIt() {
        let q = queue(.block, videoLimit: 1)
        q.push((0, 1))
        let pushed = expectation(description: "second push returned")
        let started = Date()
        let result = LockedBox<Bool?>(nil)
        Thread.detachNewThread {
            result.set(q.push((0, 2)))
            pushed.fulfill()
        }
        Thread.detachNewThread { [q] in
            // The reader takes one item 0.2 s later: the blocked producer goes on at once.
            q.wakeAfterTaking(delay: 0.2)
        }
        wait(for: [pushed], timeout: 5)
        XCTAssertEqual(result.get(), true)
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 0.15)

        let full = queue(.block, videoLimit: 1)
        full.push((0, 1))
        let refused = expectation(description: "push refused after stop")
        Thread.detachNewThread {
            XCTAssertFalse(full.push((0, 2)))
            refused.fulfill()
        }
        Thread.detachNewThread { idleFor(0.1); full.stop() }
        wait(for: [refused], timeout: 5)
    }

    func testReaderWakesOnItemEndWakeAndDeadlineNotOnATick() {
        let q = queue(.dropNewest)
        var t = Date()
        Thread.detachNewThread { idleFor(0.05); q.push((0, 7)) }
        guard case .item(let item) = q.next() else { return XCTFail("expected the item") }
        XCTAssertEqual(item.1, 7)
        XCTAssertLessThan(Date().timeIntervalSince(t), 1)

        t = Date()
        Thread.detachNewThread { idleFor(0.05); q.wake() }
        guard case .woken = q.next() else { return XCTFail("expected the wake") }

        // A wake while the reader was busy is kept for its next look.
        q.wake()
        guard case .woken = q.next(until: Monotonic.now + 5) else { return XCTFail("a wake was lost") }

        t = Date()
        guard case .deadline = q.next(until: Monotonic.now + 0.1) else { return XCTFail("expected the deadline") }
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(t), 0.09)

        q.push((1, 1))
        q.end()
        guard case .item = q.next() else { return XCTFail("what was queued comes before the end") }
        guard case .ended = q.next() else { return XCTFail("expected the end") }
        XCTAssertFalse(q.push((0, 1)), "an ended hand-off takes nothing more")
    }

    func testWaitForRoomEndsWhenTheReaderTakesOrTheDeadlinePasses() {
        let q = queue(.dropNewest, videoLimit: 1)
        q.push((0, 1))
        let t = Date()
        XCTAssertFalse(q.waitForRoom(lane: 0, cost: 1, until: Monotonic.now + 0.1))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(t), 0.09)
        Thread.detachNewThread { idleFor(0.05); _ = q.poll() }
        XCTAssertTrue(q.waitForRoom(lane: 0, cost: 1, until: Monotonic.now + 5))
    }
}

/// Test-side pause, on a condition nobody signals (the suite's own rule: no sleep calls).
private func idleFor(_ seconds: Double) {
    let c = NSCondition()
    c.lock()
    _ = c.wait(until: Date(timeIntervalSinceNow: seconds))
    c.unlock()
}

private final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ v: T) { value = v }
    func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
}

private extension HandOff {
    func wakeAfterTaking(delay: Double) {
        idleFor(delay)
        _ = poll()
    }
}
