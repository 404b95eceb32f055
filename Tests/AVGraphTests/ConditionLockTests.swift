import AVGraph
import Foundation
import XCTest

/// The one blocking primitive (`ConditionLock`): a waiter wakes when another thread changes the
/// state, a deadline ends a wait on the monotonic clock, and a taker wakes the others it made room for.
final class ConditionLockTests: XCTestCase {
    func testAWaiterWakesOnAChangeFromAnotherThread() {
        let lock = ConditionLock(0)
        let done = expectation(description: "woken")
        Thread {
            let got = lock.wait { $0 >= 3 ? $0 : nil }
            XCTAssertEqual(got, 3)
            done.fulfill()
        }.start()
        for _ in 0..<3 { lock.withLockWakingAll { $0 += 1 } }
        wait(for: [done], timeout: 5)
    }

    func testADeadlineEndsTheWaitWithOneMoreTry() {
        let lock = ConditionLock(false)
        let start = Monotonic.now
        XCTAssertNil(lock.wait(until: start + 0.05) { $0 ? true : nil })
        let waited = Monotonic.now - start
        XCTAssertGreaterThanOrEqual(waited, 0.05)
        XCTAssertLessThan(waited, 2, "the deadline, not for ever")
        XCTAssertEqual(lock.wait(until: start) { _ in 7 }, 7, "a value at once needs no wait")
    }

    func testATakerWakesTheProducersWaitingForRoom() {
        let lock = ConditionLock([Int]())
        let producers = (0..<4).map { i in
            let e = expectation(description: "producer \(i)")
            let producer = Thread {
                _ = lock.wait(wakingOthers: { _ in true }) { q -> Bool? in
                    guard q.count < 2 else { return nil }
                    q.append(i)
                    return true
                }
                e.fulfill()
            }
            producer.start()
            return e
        }
        var taken: [Int] = []
        while taken.count < 4 {
            if let item = lock.wait(until: Monotonic.now + 5, wakingOthers: { _ in true }, { q -> Int? in q.isEmpty ? nil : q.removeFirst() }) {
                taken.append(item)
            } else {
                break
            }
        }
        wait(for: producers, timeout: 5)
        XCTAssertEqual(taken.sorted(), [0, 1, 2, 3], "every producer got room as the consumer took")
    }
}
