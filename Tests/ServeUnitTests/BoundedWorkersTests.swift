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
            done.withLock { $0 += 1 }
        }
        let before = Self.threads
        var accepted = 0
        for i in 0..<1000 where pool.submit(i) { accepted += 1 }
        XCTAssertLessThanOrEqual(accepted, 12, "two at work, ten waiting: the rest refused")
        XCTAssertGreaterThanOrEqual(accepted, 10)
        XCTAssertLessThanOrEqual(Self.threads, before, "no thread for the flood")
        gate.withLockWakingAll { $0 = true }
        pool.close()
        XCTAssertEqual(done.withLock { $0 }, accepted, "what was taken was done before close returned")
        XCTAssertFalse(pool.submit(1), "a closed line takes nothing")
    }
}
