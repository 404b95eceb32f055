import AVGraph
import AVGraphServe
import XCTest

/// serve's admissions: a flood of arrivals costs no thread, only a bounded line.
final class BoundedWorkersTests: XCTestCase {
    private static var threads: Int { ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).count }

    func testAFloodWaitsInABoundedLineOnAFixedNumberOfThreads() {
        let gate = ConditionLock(false)
        let done = ConditionLock(0)
        let pool = BoundedWorkers<Int>(workers: 2, backlog: 10, name: "test-workers") { _ in
            _ = gate.wait { $0 ? true : nil }
            done.withLockWakingAll { $0 += 1 }
        }
        XCTAssertEqual(pool.running, 0, "an idle line holds no thread")
        let before = Self.threads
        var accepted = 0
        for i in 0..<1000 where pool.submit(i) { accepted += 1 }
        XCTAssertLessThanOrEqual(accepted, 12, "two at work, ten waiting: the rest refused")
        XCTAssertGreaterThanOrEqual(accepted, 10)
        XCTAssertEqual(pool.running, 2)
        // The process's own count moves with the dispatch pool too: the workers are `running`; this says no thread per item.
        XCTAssertLessThan(Self.threads, before + 10, "a thousand arrivals, not a thread each")
        gate.withLockWakingAll { $0 = true }
        pool.close()
        XCTAssertEqual(done.withLock { $0 }, accepted, "what was taken was done before close returned")
        XCTAssertEqual(pool.running, 0)
        XCTAssertFalse(pool.submit(1), "a closed line takes nothing")
    }

    func testAWorkerEndsAfterItsLingerAndANewItemStartsOneAgain() {
        let done = ConditionLock(0)
        let pool = BoundedWorkers<Int>(workers: 1, backlog: 4, linger: 0.2, name: "test-linger") { _ in done.withLockWakingAll { $0 += 1 } }
        XCTAssertTrue(pool.submit(1))
        XCTAssertEqual(done.wait(until: Monotonic.now + 2) { $0 == 1 ? 1 : nil }, 1)
        let gone = Monotonic.now + 3
        while pool.running > 0 && Monotonic.now < gone { usleep(20_000) }
        XCTAssertEqual(pool.running, 0, "gone after its linger")
        XCTAssertTrue(pool.submit(2))
        XCTAssertEqual(done.wait(until: Monotonic.now + 2) { $0 == 2 ? 2 : nil }, 2, "a new item, a new worker")
        pool.close()
    }
}
