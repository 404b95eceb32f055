import AVGraph
import AVGraphNodes
import AVGraphTransport
import Foundation
import XCTest

/// Who goes when a publisher door is full (`WaitingRoom`): never the newcomer; the silent one
/// that came first, then the one that came first; an address's own before another's.
final class WaitingRoomTests: XCTestCase {
    func testANewcomerIsNeverRefusedTheLongestWaitingSilentOneGoes() {
        var room = WaitingRoom<Int>(limits: .init(total: 3, perAddress: 3))
        XCTAssertEqual(room.enter(1, address: "10.0.0.1:1"), [])
        XCTAssertEqual(room.enter(2, address: "10.0.0.2:1"), [])
        XCTAssertEqual(room.enter(3, address: "10.0.0.3:1"), [])
        room.spoke(1)
        XCTAssertEqual(room.enter(4, address: "10.0.0.4:1"), [2], "1 spoke: the first silent one goes")
        XCTAssertEqual(room.enter(5, address: "10.0.0.5:1"), [3])
        XCTAssertEqual(room.enter(6, address: "10.0.0.6:1"), [4])
        room.spoke(5)
        room.spoke(6)
        XCTAssertEqual(room.enter(7, address: "10.0.0.7:1"), [1], "all spoke: the one that came first")
        XCTAssertEqual(room.count, 3)
        XCTAssertTrue(room.contains(7) && !room.contains(1))
    }

    func testAnAddressOverItsShareLosesItsOwnLongestWaitingNeverAnothers() {
        var room = WaitingRoom<Int>(limits: .init(total: 10, perAddress: 2))
        XCTAssertEqual(room.enter(1, address: "192.0.2.9:40000"), [])
        XCTAssertEqual(room.enter(2, address: "198.51.100.1:1"), [])
        XCTAssertEqual(room.enter(3, address: "198.51.100.1:2"), [])
        XCTAssertEqual(room.enter(4, address: "198.51.100.1:3"), [2], "its own first, not 1 that waited longer")
        XCTAssertEqual(room.count(from: "198.51.100.1"), 2)
        XCTAssertEqual(room.count(from: "192.0.2.9:1"), 1)
    }

    func testAFloodOfSilentConnectionsNeverDisplacesAPhoneThatSpoke() {
        var room = WaitingRoom<Int>(limits: .init(total: 64, perAddress: 64))
        for i in 0..<64 { _ = room.enter(i, address: "127.0.0.1:\(i)") }
        XCTAssertEqual(room.enter(-1, address: "127.0.0.1:9"), [0])
        room.spoke(-1)
        var displaced: [Int] = []
        for i in 64..<2000 { displaced += room.enter(i, address: "127.0.0.1:\(i)") }
        XCTAssertTrue(room.contains(-1), "the phone mid-handshake keeps its place")
        XCTAssertFalse(displaced.contains(-1))
        XCTAssertEqual(room.count, 64)
        room.leave(-1)
        XCTAssertEqual(room.count, 63)
        room.leave(-1)
        XCTAssertEqual(room.count, 63, "leaving twice is harmless")
    }

    func testLimitsStayPositiveAndThePerAddressShareWithinTheTotal() {
        let l = WaitingRoom<Int>.Limits(total: 0, perAddress: 500)
        XCTAssertEqual(l.total, 1)
        XCTAssertEqual(l.perAddress, 1)
        var room = WaitingRoom<Int>(limits: l)
        XCTAssertEqual(room.enter(1, address: "a"), [])
        XCTAssertEqual(room.enter(2, address: "a"), [1])
    }

    func testAddressesGroupByHostAndIPv6ByItsSlash64() {
        XCTAssertEqual(WaitingRoom<Int>.group(of: "127.0.0.1:5"), "127.0.0.1")
        XCTAssertEqual(WaitingRoom<Int>.group(of: "127.0.0.1"), "127.0.0.1")
        XCTAssertEqual(WaitingRoom<Int>.group(of: "[2001:db8:1:2:aaaa::1]:1935"), WaitingRoom<Int>.group(of: "[2001:db8:1:2:bbbb::9]:7"))
        XCTAssertNotEqual(WaitingRoom<Int>.group(of: "[2001:db8:1:2::1]:1935"), WaitingRoom<Int>.group(of: "[2001:db8:1:3::1]:1935"))
        XCTAssertEqual(WaitingRoom<Int>.group(of: "[2001:db8:1:2::1]:1935"), "2001:db8:1:2::/64")
        XCTAssertEqual(WaitingRoom<Int>.group(of: "[::ffff:192.0.2.7]:80"), "192.0.2.7", "an IPv4-mapped address is its IPv4 address")
        XCTAssertEqual(WaitingRoom<Int>.group(of: "unknown"), "unknown")
    }

    func testNoteThrottleSaysAFewLinesASecondAndCountsTheRest() {
        var t = NoteThrottle(interval: 1, lines: 2)
        XCTAssertEqual(t.pass("timeout", now: 10), 0)
        XCTAssertEqual(t.pass("timeout", now: 10.1), 0, "a handful are each said")
        XCTAssertNil(t.pass("timeout", now: 10.2))
        XCTAssertNil(t.pass("timeout", now: 10.9))
        XCTAssertEqual(t.pass("displaced", now: 10.9), 0, "each kind its own")
        XCTAssertEqual(t.pass("timeout", now: 11.0), 2, "the next line counts the two unsaid")
        XCTAssertEqual(t.pass("timeout", now: 11.1), 0)
        XCTAssertNil(t.pass("timeout", now: 11.2))
        XCTAssertEqual(t.pass("timeout", now: 20), 1)
        XCTAssertEqual(NoteThrottle.suffix(0), "")
        XCTAssertTrue(NoteThrottle.suffix(2).contains("2 more"))
    }
}
