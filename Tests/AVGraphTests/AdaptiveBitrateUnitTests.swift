import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// `h264`'s `adaptive` controller on readings alone (no encoder, no link): down at once to
/// under what the link carries, not again while the backlog drains, up in quarter steps a second
/// after a clear second, held just past the limit it saw, never outside floor and ceiling.
final class AdaptiveBitrateUnitTests: XCTestCase {
    func reading(_ backlog: Double, carries: Int? = nil, at: Double = 0) -> UplinkFeedback.Reading {
        .init(destination: "rtmp://platform", backlog: backlog, carries: carries, roundTrip: nil, at: at)
    }

    func testACongestedLinkCutsToUnderWhatItCarriesAtOnceThenWaitsWhileItDrains() {
        var c = AdaptiveBitrate(ceiling: 4_000_000, floor: 500_000)
        XCTAssertNil(c.update([reading(0.05)], now: 0), "a clear link at the ceiling: nothing")
        let cut = c.update([reading(0.4, carries: 2_000_000)], now: 1)
        XCTAssertEqual(cut?.from, 4_000_000)
        XCTAssertEqual(cut?.to, 1_700_000, "85 % of what the link carries")
        XCTAssertTrue(cut?.reason.contains("0.40 s queued") == true, cut?.reason ?? "")
        XCTAssertNil(c.update([reading(0.6, carries: 2_000_000)], now: 1.2), "not twice within half a second")
        XCTAssertNil(c.update([reading(0.3, carries: 2_000_000)], now: 1.8), "the backlog shrinks: the cut works")
        XCTAssertEqual(c.current, 1_700_000)
    }

    func testAFarBehindLinkDrainsWithMoreMarginAndNeverBelowTheFloor() {
        var c = AdaptiveBitrate(ceiling: 4_000_000, floor: 1_000_000)
        XCTAssertEqual(c.update([reading(1.5, carries: 2_000_000)], now: 0)?.to, 1_400_000, "70 % past a second of backlog")
        XCTAssertEqual(c.update([reading(2.5, carries: 600_000)], now: 1)?.to, 1_000_000, "the floor")
        XCTAssertNil(c.update([reading(3.5, carries: 300_000)], now: 2), "at the floor: nothing lower")
    }

    func testTheClimbIsAQuarterOfTheCeilingASecondAndProbesJustPastTheLimitSeen() {
        var c = AdaptiveBitrate(ceiling: 4_000_000, floor: 500_000)
        _ = c.update([reading(0.5, carries: 2_000_000)], now: 0)   // 1.7 Mbit/s, limit 2.0
        XCTAssertNil(c.update([reading(0.05)], now: 1), "clear just now")
        XCTAssertNil(c.update([reading(0.05)], now: 1.9), "clear for less than a second, and under 2 s since the cut")
        let up = c.update([reading(0.05)], now: 2.5)
        XCTAssertEqual(up?.to, 2_200_000, "a quarter step, held at 110 % of the 2 Mbit/s seen")
        XCTAssertNil(c.update([reading(0.05)], now: 3.5), "held at the probe")
        XCTAssertNil(c.update([reading(0.05)], now: 5.0))
        XCTAssertEqual(c.update([reading(0.05)], now: 5.6)?.to, 3_200_000, "clear at the probe for 2 s: the link widened")
        XCTAssertEqual(c.update([reading(0.05)], now: 6.6)?.to, 4_000_000, "the ceiling, not past it")
        XCTAssertNil(c.update([reading(0.05)], now: 8))
    }

    func testAManualChangeIsTheNewCeilingAndTheNarrowestOfSeveralLinksDecides() {
        var c = AdaptiveBitrate(ceiling: 4_000_000, floor: 500_000)
        c.setCeiling(3_000_000)
        XCTAssertEqual(c.current, 3_000_000)
        let cut = c.update([reading(0.05), reading(0.5, carries: 2_500_000), reading(0.3, carries: 1_000_000)], now: 0)
        XCTAssertEqual(cut?.to, 850_000, "the link that carries least")
        XCTAssertNil(c.update([reading(0.05), reading(0.2)], now: 5), "one link between clear and congested: no climb")
        c.setCeiling(100_000)
        XCTAssertEqual(c.current, 500_000, "never below the floor")
    }
}
