import AVGraphTransport
import Foundation
import XCTest

/// VP9 out of RTP (RFC 9628): libvpx's frames packetized here with the descriptors a WebRTC
/// sender writes (picture id, layer indices, the scalability structure on keyframes, flexible
/// mode's references), reassembled byte for byte and decoded by ffprobe; spatial layers joined
/// into a superframe; holes damaging only their picture; hostile payloads never trapping.
final class RtpVp9Tests: XCTestCase {
    private func packet(_ seq: UInt16, _ ts: UInt32, _ payload: [UInt8], marker: Bool = false) -> RtpPacket {
        RtpPacket(marker: marker, payloadType: 98, sequence: seq, timestamp: ts, ssrc: 9, payload: payload[...])
    }

    /// One frame as packets of at most `size` bytes of VP9: non-flexible mode, a 15-bit picture
    /// id, layer indices and TL0PICIDX, and on a keyframe the scalability structure (one layer,
    /// 320x240, a picture group of one).
    private func packetize(_ frame: [UInt8], picture: Int, keyframe: Bool, size: Int = 1000) -> [[UInt8]] {
        stride(from: 0, to: frame.count, by: size).map { start in
            let first = start == 0, last = start + size >= frame.count
            let flags: UInt8 = 0x80 | (keyframe ? 0 : 0x40) | 0x20 | (first ? 0x08 : 0) | (last ? 0x04 : 0) | (first && keyframe ? 0x02 : 0)
            var descriptor: [UInt8] = [flags, 0x80 | UInt8(picture >> 8 & 0x7F), UInt8(picture & 0xFF), 0x00, UInt8(picture & 0xFF)]
            if first && keyframe { descriptor += [0x18, 0x01, 0x40, 0x00, 0xF0, 0x01, 0x04, 0x01] }
            return descriptor + frame[start..<min(frame.count, start + size)]
        }
    }

    func testLibvpxFramesReassembleByteForByteAndDecode() throws {
        let dir = TestSupport.scratch()
        try IvfFile.encode(["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8"], frames: 60, to: dir + "/in.ivf")
        let original = try IvfFile.frames(dir + "/in.ivf")
        XCTAssertEqual(original.count, 60)
        var d = Vp9Depacketizer()
        var out: [Vp9Depacketizer.Frame] = [], seq: UInt16 = 65000, packets = 0
        for (index, frame) in original.enumerated() {
            let key = VideoSequenceSize.vp9(frame: frame[...]) != nil
            let payloads = packetize(frame, picture: index, keyframe: key)
            for (n, payload) in payloads.enumerated() {
                out += d.push(packet(seq, UInt32(index * 3000), payload, marker: n == payloads.count - 1))
                seq &+= 1
                packets += 1
            }
        }
        XCTAssertEqual(out.map(\.bytes), original, "\(packets) packets")
        XCTAssertEqual(out.filter(\.isKeyframe).map { Int($0.timestamp) / 3000 }, [0, 30])
        XCTAssertTrue(VideoSequenceSize.vp9(frame: out[0].bytes[...])! == (320, 240))
        print("vp9: \(original.count) frames in \(packets) packets")
        XCTAssertEqual(try IvfFile.decoded(out.map(\.bytes), fourcc: "VP90", at: dir + "/out.ivf"), "vp9,320,240,60")
    }

    func testFlexibleModeAndTwoSpatialLayersMakeASuperframe() {
        var d = Vp9Depacketizer()
        let base: [UInt8] = [0x82, 0x49, 0x83, 0x42, 0x00, 0x27, 0xF0, 0x1D, 0xF0, 1, 2], upper: [UInt8] = [0x86, 9, 9, 9]
        // Flexible mode (F), picture id, layers (SID 0), no references on a keyframe; B and E in one packet.
        XCTAssertEqual(d.push(packet(1, 100, [0x80 | 0x20 | 0x10 | 0x08 | 0x04, 0x05, 0x00] + base)), [])
        // The upper layer (SID 1, D): inter-layer, P with two references (N on the first); the marker.
        let done = d.push(packet(2, 100, [0x80 | 0x40 | 0x20 | 0x10 | 0x08 | 0x04, 0x05, 0x03, 0x03, 0x04] + upper, marker: true))
        let index: [UInt8] = [0xC1, 11, 4, 0xC1]
        XCTAssertEqual(done, [.init(timestamp: 100, bytes: base + upper + index, isKeyframe: true, damaged: false)],
                       "a keyframe by its base layer (P unset, a key frame's header); the upper layer's P does not change that")
    }

    func testAHoleOrALostStartDamagesOnlyItsPicture() {
        var d = Vp9Depacketizer()
        let key: [UInt8] = [0x82, 0x49, 0x83, 0x42, 0x00] + [UInt8](repeating: 7, count: 30)
        XCTAssertEqual(d.push(packet(1, 100, [0x08] + key.prefix(10))), [])
        // 2 is lost; 3 ends the picture.
        XCTAssertEqual(d.push(packet(3, 100, [0x04] + key.suffix(5), marker: true)), [.init(timestamp: 100, bytes: [], isKeyframe: true, damaged: true)])
        // The next picture's start lost.
        XCTAssertEqual(d.push(packet(5, 200, [0x44, 1], marker: true)).map(\.damaged), [true])
        // Whole again: an interframe in one packet.
        XCTAssertEqual(d.push(packet(6, 300, [0x4C, 0x86, 1], marker: true)), [.init(timestamp: 300, bytes: [0x86, 1], isKeyframe: false, damaged: false)])
        // A picture whose marker was lost ends, damaged, when the timestamp moves on; the next is whole.
        _ = d.push(packet(7, 400, [0x48, 0x86, 2]))
        XCTAssertEqual(d.push(packet(9, 500, [0x4C, 0x86, 3], marker: true)).map(\.damaged), [true, false])
    }

    func testHostilePayloadsNeverTrapAndStayBounded() {
        var d = Vp9Depacketizer(maxBytes: 4096)
        XCTAssertGreaterThan(HostileRtp.frames(maxBytes: 4096) { d.push($0) }, 1000)
        // A descriptor (I with M, L, TL0PICIDX, V with sizes and a picture group) cut short at every byte: damaged.
        let full: [UInt8] = [0xAE, 0x81, 0x02, 0x00, 0x01, 0x18, 0x01, 0x40, 0x00, 0xF0, 0x01, 0x04, 0x01]
        var fresh = Vp9Depacketizer()
        for n in 0..<full.count {
            XCTAssertEqual(fresh.push(packet(UInt16(n), UInt32(n), Array(full.prefix(n)), marker: true)).map(\.damaged), [true], "\(n) bytes")
        }
        XCTAssertEqual(fresh.push(packet(100, 100, full + [0x82, 0x49, 0x83, 0x42], marker: true)).map(\.damaged), [false], "the whole descriptor")
    }
}
