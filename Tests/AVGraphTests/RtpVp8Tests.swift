import AVGraphTransport
import XCTest

/// VP8 out of RTP (RFC 7741): payload descriptors of every shape a sender writes, partitions
/// joined into frames, and frames with a hole or a lost start handed on damaged and empty.
final class RtpVp8Tests: XCTestCase {
    private func packet(_ seq: UInt16, _ ts: UInt32, _ payload: [UInt8], marker: Bool = false) -> RtpPacket {
        RtpPacket(marker: marker, payloadType: 96, sequence: seq, timestamp: ts, ssrc: 7, payload: payload[...])
    }

    func testDescriptorsOfEveryShapeAreTakenOff() {
        var d = Vp8Depacketizer()
        // X, I with a 15-bit picture id, L (TL0PICIDX), T/K (one byte); S and PID 0: a frame's start. Keyframe: P bit 0.
        let first = d.push(packet(1, 100, [0x90, 0xF0, 0x80, 0x01, 0x05, 0x20] + [0x10, 1, 2, 3]))
        XCTAssertEqual(first, [])
        // A continuation: X with a 7-bit picture id only.
        let done = d.push(packet(2, 100, [0x80, 0x80, 0x01] + [4, 5], marker: true))
        XCTAssertEqual(done, [.init(timestamp: 100, bytes: [0x10, 1, 2, 3, 4, 5], isKeyframe: true, damaged: false)])
        // No extension at all, an interframe (P bit 1), in one packet.
        XCTAssertEqual(d.push(packet(3, 200, [0x10, 0x11, 9], marker: true)), [.init(timestamp: 200, bytes: [0x11, 9], isKeyframe: false, damaged: false)])
    }

    func testAHoleOrALostStartDamagesOnlyItsFrame() {
        var d = Vp8Depacketizer()
        _ = d.push(packet(1, 100, [0x10, 0x10, 1]))
        // 2 is lost; 3 ends the frame.
        XCTAssertEqual(d.push(packet(3, 100, [0x00, 2], marker: true)), [.init(timestamp: 100, bytes: [], isKeyframe: true, damaged: true)])
        // The next frame's start lost: its remainder is no frame.
        XCTAssertEqual(d.push(packet(5, 200, [0x00, 3], marker: true)), [.init(timestamp: 200, bytes: [], isKeyframe: false, damaged: true)])
        // Then whole again.
        XCTAssertEqual(d.push(packet(6, 300, [0x10, 0x11, 4], marker: true)).first?.damaged, false)
        // A frame whose marker was lost ends, damaged, when the timestamp moves on.
        _ = d.push(packet(7, 400, [0x10, 0x11, 5]))
        let next = d.push(packet(9, 500, [0x10, 0x11, 6], marker: true))
        XCTAssertEqual(next.map(\.damaged), [true, false])
    }

    func testMalformedDescriptorsAndTheBound() {
        var d = Vp8Depacketizer(maxBytes: 10)
        XCTAssertEqual(d.push(packet(1, 1, [])), [])
        XCTAssertEqual(d.push(packet(2, 1, [0x80], marker: true)).first?.damaged, true, "X set and nothing after")
        _ = d.push(packet(3, 2, [0x10] + [UInt8](repeating: 0x11, count: 8)))
        XCTAssertEqual(d.push(packet(4, 2, [0x00] + [UInt8](repeating: 1, count: 8), marker: true)).first?.damaged, true, "past maxBytes")
    }
}
