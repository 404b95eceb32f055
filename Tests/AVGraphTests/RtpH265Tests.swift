import AVGraphTransport
import Foundation
import XCTest

/// HEVC out of RTP (RFC 7798): libx265's access units packetized here as WebRTC senders do it
/// (the parameter sets in one aggregation packet, slices above the MTU in fragmentation units,
/// the rest single), reassembled byte for byte and decoded by ffprobe; a lost fragment damaging
/// only its access unit; hostile payloads never trapping.
final class RtpH265Tests: XCTestCase {
    private func packet(_ seq: UInt16, _ ts: UInt32, _ payload: [UInt8], marker: Bool = false) -> RtpPacket {
        RtpPacket(marker: marker, payloadType: 100, sequence: seq, timestamp: ts, ssrc: 5, payload: payload[...])
    }

    private func type(_ nal: [UInt8]) -> UInt8 { nal[0] >> 1 & 0x3F }

    /// One access unit's payloads: consecutive small NAL units (at most `mtu` together) in an
    /// aggregation packet, a NAL unit above `mtu` in fragmentation units, any other single.
    private func packetize(_ units: [[UInt8]], mtu: Int = 1000) -> [[UInt8]] {
        var payloads: [[UInt8]] = [], pending: [[UInt8]] = []
        func flush() {
            if pending.count == 1 {
                payloads.append(pending[0])
            } else if pending.count > 1 {
                // The payload header: type 48, the lowest layer id and temporal id of those inside.
                payloads.append([48 << 1, 1] + pending.flatMap { [UInt8($0.count >> 8), UInt8($0.count & 0xFF)] + $0 })
            }
            pending = []
        }
        for nal in units {
            if nal.count > mtu {
                flush()
                let body = nal.dropFirst(2)
                let pieces = stride(from: body.startIndex, to: body.endIndex, by: mtu).map { body[$0..<min(body.endIndex, $0 + mtu)] }
                for (i, piece) in pieces.enumerated() {
                    let fu = (i == 0 ? 0x80 : 0) | (i == pieces.count - 1 ? 0x40 : 0) | type(nal)
                    payloads.append([nal[0] & 0x81 | 49 << 1, nal[1], fu] + piece)
                }
            } else {
                if pending.map({ $0.count + 2 }).reduce(2, +) + nal.count + 2 > mtu { flush() }
                pending.append(nal)
            }
        }
        flush()
        return payloads
    }

    /// The NAL units of an Annex B stream (3- or 4-byte start codes), grouped into access units:
    /// one starts at a parameter set or prefix SEI, or at a slice that is a picture's first,
    /// once the unit so far has a picture's slices.
    private func accessUnits(_ stream: [UInt8]) -> [[[UInt8]]] {
        var nals: [[UInt8]] = [], start: Int?, i = 0
        while i + 2 < stream.count {
            if stream[i] == 0, stream[i + 1] == 0, stream[i + 2] == 1 {
                if let s = start { nals.append(Array(stream[s..<(stream[i - 1] == 0 ? i - 1 : i)])) }
                i += 3
                start = i
            } else {
                i += 1
            }
        }
        if let s = start { nals.append(Array(stream[s...])) }
        var units: [[[UInt8]]] = [], current: [[UInt8]] = [], hasSlice = false
        for nal in nals {
            let t = type(nal)
            let startsUnit = [32, 33, 34, 35, 39].contains(t) || (t < 32 && nal[2] & 0x80 != 0)
            if startsUnit && hasSlice {
                units.append(current)
                current = []
                hasSlice = false
            }
            current.append(nal)
            if t < 32 { hasSlice = true }
        }
        if !current.isEmpty { units.append(current) }
        return units
    }

    func testLibx265UnitsReassembleByteForByteAndDecode() throws {
        let dir = TestSupport.scratch()
        _ = try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "60",
                                   "-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                                   "-x265-params", "log-level=error:keyint=30:min-keyint=30:scenecut=0:bframes=0", "-f", "hevc", dir + "/in.hevc"])
        let original = accessUnits(Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/in.hevc"))))
        XCTAssertEqual(original.count, 60)
        var d = H265Depacketizer()
        var out: [H265Depacketizer.Frame] = [], seq: UInt16 = 65500, packets = 0, kinds: [String: Int] = [:]
        for (index, unit) in original.enumerated() {
            let payloads = packetize(unit)
            for (n, payload) in payloads.enumerated() {
                kinds[payload[0] >> 1 & 0x3F == 48 ? "aggregation" : payload[0] >> 1 & 0x3F == 49 ? "fragment" : "single", default: 0] += 1
                out += d.push(packet(seq, UInt32(index * 3000), payload, marker: n == payloads.count - 1))
                seq &+= 1
                packets += 1
            }
        }
        print("h265: \(original.count) access units in \(packets) packets \(kinds)")
        XCTAssertGreaterThan(kinds["aggregation"] ?? 0, 1)
        XCTAssertGreaterThan(kinds["fragment"] ?? 0, 2)
        XCTAssertGreaterThan(kinds["single"] ?? 0, 10)
        XCTAssertEqual(out.map(\.bytes), original.map { $0.flatMap { [0, 0, 0, 1] + $0 } }, "every NAL unit byte for byte")
        XCTAssertEqual(out.filter(\.isKeyframe).map { Int($0.timestamp) / 3000 }, [0, 30])
        XCTAssertTrue(out.allSatisfy { !$0.damaged })
        let sps = original[0].first { type($0) == 33 }
        XCTAssertTrue(sps.flatMap { VideoSequenceSize.hevc(sps: $0[...]) }! == (320, 240))
        let path = dir + "/out.hevc"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(out.flatMap(\.bytes))))
        let frames = try TestSupport.shell(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                                            "-show_entries", "stream=codec_name,width,height,nb_read_frames", "-of", "csv=p=0", path])
        XCTAssertEqual(frames.trimmingCharacters(in: .whitespacesAndNewlines), "hevc,320,240,60")
    }

    func testAggregationFragmentsAndPaci() {
        var d = H265Depacketizer()
        let vps: [UInt8] = [0x40, 0x01, 1], sps: [UInt8] = [0x42, 0x01, 2, 3], pps: [UInt8] = [0x44, 0x01, 4]
        let idr: [UInt8] = [0x26, 0x01] + [UInt8](repeating: 9, count: 300)  // IDR_W_RADL (19)
        XCTAssertEqual(d.push(packet(1, 3000, [0x60, 0x01, 0, 3] + vps + [0, 4] + sps + [0, 3] + pps)), [])
        XCTAssertEqual(d.push(packet(2, 3000, [0x64, 0x00, 0x11, 0x22])), [], "PACI dropped")
        XCTAssertEqual(d.push(packet(3, 3000, [0x62, 0x01, 0x80 | 19] + idr[2..<150])), [])
        let units = d.push(packet(4, 3000, [0x62, 0x01, 0x40 | 19] + idr[150...], marker: true))
        XCTAssertEqual(units, [.init(timestamp: 3000, bytes: [vps, sps, pps, idr].flatMap { [0, 0, 0, 1] + $0 }, isKeyframe: true, damaged: false)])
        // A trailing picture in one packet, ended by the next timestamp (no marker).
        XCTAssertEqual(d.push(packet(5, 6000, [0x02, 0x01, 0xA0, 7])), [])
        XCTAssertEqual(d.push(packet(6, 9000, [0x02, 0x01, 0xA0, 8], marker: true)).map(\.isKeyframe), [false, false])
    }

    func testALostFragmentDamagesOnlyItsAccessUnit() {
        var d = H265Depacketizer()
        let body = [UInt8](repeating: 3, count: 100)
        _ = d.push(packet(10, 100, [0x62, 0x01, 0x80 | 19] + body))
        // 11 lost; 12 is the end fragment of the same NAL unit.
        XCTAssertEqual(d.push(packet(12, 100, [0x62, 0x01, 0x40 | 19] + body, marker: true)), [.init(timestamp: 100, bytes: [], isKeyframe: false, damaged: true)])
        XCTAssertEqual(d.push(packet(13, 200, [0x02, 0x01, 0xA0, 1], marker: true)), [.init(timestamp: 200, bytes: [0, 0, 0, 1, 0x02, 0x01, 0xA0, 1], isKeyframe: false, damaged: false)])
        // A fragment whose end never came, then a marker: damaged.
        _ = d.push(packet(14, 300, [0x62, 0x01, 0x80 | 1] + body))
        XCTAssertEqual(d.push(packet(15, 300, [0x02, 0x01, 0x20, 1], marker: true)).map(\.damaged), [true])
    }

    func testAUnitSizedToExhaustMemoryIsCutOff() {
        var d = H265Depacketizer(maxBytes: 10_000)
        _ = d.push(packet(0, 1, [0x62, 0x01, 0x80 | 1] + [UInt8](repeating: 1, count: 1000)))
        for i in 1...50 { _ = d.push(packet(UInt16(i), 1, [0x62, 0x01, 1] + [UInt8](repeating: 1, count: 1000))) }
        XCTAssertEqual(d.push(packet(51, 1, [0x62, 0x01, 0x40 | 1, 1], marker: true)).map(\.damaged), [true])
    }

    func testHostilePayloadsNeverTrapAndStayBounded() {
        var d = H265Depacketizer(maxBytes: 4096)
        XCTAssertGreaterThan(HostileRtp.frames(maxBytes: 4096) { d.push($0) }, 1000)
    }
}
