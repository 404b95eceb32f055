import AVGraphTransport
import XCTest

/// The receiver's side of loss: the reorder buffer that holds a hole for its retransmission and
/// gives it up in time, and the RTCP it asks with (RFC 4585's generic NACK and PLI, byte for byte).
final class RtpFeedbackTests: XCTestCase {
    private func packet(_ seq: UInt16) -> RtpPacket {
        RtpPacket(marker: false, payloadType: 96, sequence: seq, timestamp: 0, ssrc: 1, payload: [][...])
    }

    func testNackNamesEachLostPacketInPidAndBitmask() {
        let nack = RtcpFeedback.nack(sender: 0x0102_0304, media: 0x0A0B_0C0D, lost: [105, 100, 101, 130, 116])
        XCTAssertEqual(nack, [0x81, 205, 0, 4, 1, 2, 3, 4, 0x0A, 0x0B, 0x0C, 0x0D,
                              0, 100, 0x80, 0x11,  // 100, and of the 16 after it 101 (bit 0), 105 (bit 4), 116 (bit 15)
                              0, 130, 0, 0])
        XCTAssertEqual(RtcpFeedback.nack(sender: 1, media: 2, lost: [65535, 0]).suffix(4), [0xFF, 0xFF, 0, 1], "across the wrap")
        XCTAssertEqual(RtcpFeedback.pli(sender: 1, media: 2), [0x81, 206, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2])
    }

    func testAHoleIsHeldUntilItsPacketComesOrItsTimeIsUp() {
        var b = RtpReorderBuffer(wait: 0.2)
        XCTAssertEqual(b.push(packet(10), now: 0).map(\.sequence), [10])
        XCTAssertEqual(b.push(packet(12), now: 0.01).map(\.sequence), [])
        XCTAssertEqual(b.push(packet(13), now: 0.02).map(\.sequence), [])
        XCTAssertEqual(b.missing, [11])
        XCTAssertEqual(b.push(packet(11), now: 0.05).map(\.sequence), [11, 12, 13], "the retransmission fills the hole")
        XCTAssertEqual(b.push(packet(11), now: 0.06).map(\.sequence), [], "a late duplicate is dropped")
        XCTAssertEqual(b.push(packet(15), now: 0.1).map(\.sequence), [])
        XCTAssertEqual(b.release(now: 0.25).map(\.sequence), [], "not yet 0.2 s")
        XCTAssertEqual(b.release(now: 0.31).map(\.sequence), [15], "given up: on past the hole")
        XCTAssertEqual(b.skipped, 1)
    }

    func testSequenceNumbersWrap() {
        var b = RtpReorderBuffer()
        _ = b.push(packet(65534), now: 0)
        XCTAssertEqual(b.push(packet(0), now: 0).map(\.sequence), [])
        XCTAssertEqual(b.missing, [65535])
        XCTAssertEqual(b.push(packet(65535), now: 0).map(\.sequence), [65535, 0])
    }
}
