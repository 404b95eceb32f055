import AVGraphTransport
import Foundation
import XCTest

/// AV1 out of RTP (AOMedia's RTP payload format v1.0): libaom's temporal units packetized here as
/// the format says (temporal delimiters dropped, OBUs without their size fields, fragments across
/// packets with Z and Y, W counted or every element with its length, N on a new sequence),
/// reassembled into the low-overhead format byte for byte and decoded by ffprobe; holes damaging
/// only their unit; hostile payloads never trapping.
final class RtpAv1Tests: XCTestCase {
    private func packet(_ seq: UInt16, _ ts: UInt32, _ payload: [UInt8], marker: Bool = false) -> RtpPacket {
        RtpPacket(marker: marker, payloadType: 45, sequence: seq, timestamp: ts, ssrc: 1, payload: payload[...])
    }

    private func leb128(_ value: Int) -> [UInt8] {
        var out: [UInt8] = [], rest = value
        repeat {
            out.append(UInt8(rest & 0x7F) | (rest >> 7 > 0 ? 0x80 : 0))
            rest >>= 7
        } while rest > 0
        return out
    }

    /// A temporal unit's OBUs as RTP carries them: no temporal delimiter, no size fields.
    private func obuElements(_ unit: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = [], at = 0
        while at < unit.count {
            let header = unit[at], headerLength = header & 0x04 != 0 ? 2 : 1
            var sizeAt = at + headerLength, size = 0, shift = 0
            while true {
                let b = unit[sizeAt]
                sizeAt += 1
                size |= Int(b & 0x7F) << shift
                shift += 7
                if b & 0x80 == 0 { break }
            }
            if header >> 3 & 0x0F != 2 { out.append([header & ~0x02] + unit[(at + 1)..<(at + headerLength)] + unit[sizeAt..<(sizeAt + size)]) }
            at = sizeAt + size
        }
        return out
    }

    /// Payloads of at most `mtu` bytes; `counted`: W says how many elements (up to 3) and the last
    /// goes without its length.
    private func packetize(_ unit: [UInt8], newSequence: Bool, counted: Bool, mtu: Int = 1000) -> [[UInt8]] {
        var payloads: [[UInt8]] = [], elements: [[UInt8]] = [], room = mtu - 1, continuation = false
        func flush(continuesInNext: Bool) {
            let w = counted && elements.count <= 3 ? elements.count : 0
            var header = UInt8(w << 4) | (continuation ? 0x80 : 0) | (continuesInNext ? 0x40 : 0)
            if newSequence && payloads.isEmpty { header |= 0x08 }
            var payload = [header]
            for (i, e) in elements.enumerated() { payload += (w != 0 && i == w - 1 ? [] : leb128(e.count)) + e }
            payloads.append(payload)
            elements = []
            room = mtu - 1
            continuation = continuesInNext
        }
        for obu in obuElements(unit) {
            var rest = obu[...]
            while !rest.isEmpty {
                if room < 3 { flush(continuesInNext: false) }
                let take = min(rest.count, room - 2)
                elements.append(Array(rest.prefix(take)))
                room -= take + 2
                rest = rest.dropFirst(take)
                if !rest.isEmpty { flush(continuesInNext: true) }
            }
        }
        if !elements.isEmpty { flush(continuesInNext: false) }
        return payloads
    }

    func testLibaomUnitsReassembleByteForByteAndDecode() throws {
        let dir = TestSupport.scratch()
        try IvfFile.encode(["-c:v", "libaom-av1", "-cpu-used", "8"], frames: 60, to: dir + "/in.ivf")
        let original = try IvfFile.frames(dir + "/in.ivf")
        XCTAssertEqual(original.count, 60)
        var d = Av1Depacketizer()
        var out: [Av1Depacketizer.Frame] = [], seq: UInt16 = 65500, packets = 0, fragmented = 0
        for (index, unit) in original.enumerated() {
            // A sequence header OBU (type 1) after the delimiter: libaom writes one with each keyframe.
            let newSequence = unit.count > 2 && unit[2] >> 3 & 0x0F == 1
            let payloads = packetize(unit, newSequence: newSequence, counted: index % 2 == 1)
            fragmented += payloads.filter { $0[0] & 0x40 != 0 }.count
            for (n, payload) in payloads.enumerated() {
                out += d.push(packet(seq, UInt32(index * 3000), payload, marker: n == payloads.count - 1))
                seq &+= 1
                packets += 1
            }
        }
        XCTAssertGreaterThan(fragmented, 0, "some OBUs span packets")
        XCTAssertEqual(out.map(\.bytes), original, "\(packets) packets, \(fragmented) ending in a fragment")
        XCTAssertEqual(out.filter(\.isKeyframe).map { Int($0.timestamp) / 3000 }, [0, 30])
        print("av1: \(original.count) temporal units in \(packets) packets, \(fragmented) ending in a fragment")
        XCTAssertEqual(try IvfFile.decoded(out.map(\.bytes), fourcc: "AV01", at: dir + "/out.ivf"), "av1,320,240,60")
    }

    func testSizeFieldsExtensionsAndDroppedObus() {
        var d = Av1Depacketizer()
        // W=0: a temporal delimiter (dropped), a frame OBU with an extension and its own size field
        // (3, then a byte past it that is not the OBU's), padding (dropped).
        let withSize: [UInt8] = [0x36, 0x08, 0x03, 1, 2, 3, 0xEE]
        XCTAssertEqual(d.push(packet(1, 10, [0x00, 0x01, 0x10] + [UInt8(withSize.count)] + withSize + [0x02, 0x78, 0])), [])
        // W=1: a frame OBU as RTP should carry it (no size field), the rest of the payload.
        let done = d.push(packet(2, 10, [0x10, 0x30, 4, 5], marker: true))
        XCTAssertEqual(done, [.init(timestamp: 10, bytes: [0x12, 0x00, 0x36, 0x08, 0x03, 1, 2, 3, 0x32, 0x02, 4, 5], isKeyframe: false, damaged: false)])
    }

    func testAHoleOrALostStartDamagesOnlyItsUnit() {
        var d = Av1Depacketizer()
        // N: a new sequence; one OBU in three fragments (Y, then Z and Y, then Z); the middle is lost.
        XCTAssertEqual(d.push(packet(1, 100, [0x48 | 0x10, 0x08, 1, 2])), [])
        XCTAssertEqual(d.push(packet(3, 100, [0x90, 5, 6], marker: true)), [.init(timestamp: 100, bytes: [], isKeyframe: true, damaged: true)])
        // The next unit starts with a continuation of nothing.
        XCTAssertEqual(d.push(packet(4, 200, [0x90, 7], marker: true)).map(\.damaged), [true])
        // Whole again, in three fragments.
        _ = d.push(packet(5, 300, [0x50, 0x30, 1]))
        _ = d.push(packet(6, 300, [0xD0, 2]))
        XCTAssertEqual(d.push(packet(7, 300, [0x90, 3], marker: true)), [.init(timestamp: 300, bytes: [0x12, 0x00, 0x32, 3, 1, 2, 3], isKeyframe: false, damaged: false)])
        // A fragment announced (Y) and the unit's marker: damaged, for the OBU never ended.
        XCTAssertEqual(d.push(packet(8, 400, [0x50, 0x30, 1], marker: true)).map(\.damaged), [true])
    }

    func testHostilePayloadsNeverTrapAndStayBounded() {
        var d = Av1Depacketizer(maxBytes: 4096)
        XCTAssertGreaterThan(HostileRtp.frames(maxBytes: 4096) { d.push($0) }, 1000)
        var fresh = Av1Depacketizer()
        let malformed: [(payload: [UInt8], why: String)] = [([0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x30], "a length of more than 8 bytes"),
                                                           ([0x00, 0x05, 0x30, 2], "a length past the end"), ([0x30, 0x01, 0x30], "W=3 and one element"),
                                                           ([0x10], "no element"), ([0x10, 0xB0, 1], "the forbidden bit"), ([0x10, 0x32, 9, 1], "an OBU size past its element")]
        for (n, m) in malformed.enumerated() {
            XCTAssertEqual(fresh.push(packet(UInt16(n), UInt32(n), m.payload, marker: true)).map(\.damaged), [true], m.why)
        }
        XCTAssertEqual(fresh.push(packet(100, 100, [0x10, 0x32, 1, 1], marker: true)).map(\.damaged), [false], "a whole OBU")
    }
}
