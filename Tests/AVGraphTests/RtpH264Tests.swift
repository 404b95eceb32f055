import AVGraphTransport
import Foundation
import XCTest

/// RTP and H.264 out of it (RFC 3550, RFC 6184): packets made by hand for the cases a sender
/// may choose, and a stream packetized by ffmpeg's own RTP muxer (a packetizer nobody here wrote)
/// reassembled and decoded by ffmpeg.
final class RtpH264Tests: XCTestCase {
    private func packet(_ seq: UInt16, _ ts: UInt32, _ payload: [UInt8], marker: Bool = false) -> RtpPacket {
        RtpPacket(marker: marker, payloadType: 96, sequence: seq, timestamp: ts, ssrc: 0x1234_5678, payload: payload[...])
    }

    func testHeaderWithCsrcsExtensionAndPaddingRoundTrips() throws {
        let p = RtpPacket(marker: true, payloadType: 111, sequence: 65535, timestamp: 0xDEAD_BEEF, ssrc: 42, payload: [1, 2, 3][...],
                          csrcs: [7, 8], extensionProfile: 0xBEDE, extensionData: [0x10, 0xAA, 0, 0])
        let bytes = p.encoded
        XCTAssertEqual(try RtpPacket.parse(bytes), p)
        var padded = bytes
        padded[0] |= 0x20
        padded += [0, 0, 3]
        XCTAssertEqual(try RtpPacket.parse(padded).payload, [1, 2, 3][...])
        XCTAssertThrowsError(try RtpPacket.parse(Array(bytes.prefix(11))))
        var badPad = bytes
        badPad[0] |= 0x20
        badPad[badPad.count - 1] = 200
        XCTAssertThrowsError(try RtpPacket.parse(badPad))
        var manyCsrcs = bytes
        manyCsrcs[0] |= 0x0F
        XCTAssertThrowsError(try RtpPacket.parse(manyCsrcs), "15 CSRCs past the end")
        XCTAssertTrue(RtpPacket.looksLikeRtp(bytes))
    }

    func testSingleStapAndFragmentedUnitsBecomeOneAnnexBAccessUnit() {
        var d = H264Depacketizer()
        let sps: [UInt8] = [0x67, 1, 2, 3], pps: [UInt8] = [0x68, 4, 5], idr = [0x65] + [UInt8](repeating: 9, count: 3000)
        XCTAssertEqual(d.push(packet(1, 3000, [0x18, 0, 4] + sps + [0, 3] + pps)), [])
        // The IDR in three FU-A fragments: indicator (NRI of the NAL, type 28), header (S/E, type 5).
        let body = Array(idr.dropFirst())
        XCTAssertEqual(d.push(packet(2, 3000, [0x7C, 0x85] + body[0..<1000])), [])
        XCTAssertEqual(d.push(packet(3, 3000, [0x7C, 0x05] + body[1000..<2000])), [])
        let units = d.push(packet(4, 3000, [0x7C, 0x45] + body[2000...], marker: true))
        XCTAssertEqual(units.count, 1)
        XCTAssertEqual(units.first?.bytes, [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps + [0, 0, 0, 1] + [0x65] + body)
        XCTAssertEqual(units.first?.isKeyframe, true)
        XCTAssertEqual(units.first?.damaged, false)
        // Next picture, a single NAL unit; its end is seen when the timestamp moves on (no marker).
        XCTAssertEqual(d.push(packet(5, 6000, [0x41, 7, 7])), [])
        let next = d.push(packet(6, 9000, [0x41, 8], marker: true))
        XCTAssertEqual(next.map(\.timestamp), [6000, 9000])
        XCTAssertEqual(next.first?.isKeyframe, false)
    }

    func testALostFragmentDamagesOnlyItsOwnPicture() {
        var d = H264Depacketizer()
        let body = [UInt8](repeating: 3, count: 100)
        _ = d.push(packet(10, 100, [0x7C, 0x85] + body))
        // 11 lost; 12 is the end fragment of the same NAL unit.
        let damaged = d.push(packet(12, 100, [0x7C, 0x45] + body, marker: true))
        XCTAssertEqual(damaged.first?.damaged, true)
        XCTAssertEqual(damaged.first?.bytes, [], "no NAL unit made of half its bytes")
        let clean = d.push(packet(13, 200, [0x41, 1, 2], marker: true))
        XCTAssertEqual(clean.first?.damaged, false)
        XCTAssertEqual(clean.first?.bytes, [0, 0, 0, 1, 0x41, 1, 2])
    }

    func testAPictureSizedToExhaustMemoryIsCutOff() {
        var d = H264Depacketizer(maxBytes: 10_000)
        _ = d.push(packet(0, 1, [0x7C, 0x85] + [UInt8](repeating: 1, count: 1000)))
        for i in 1...50 { _ = d.push(packet(UInt16(i), 1, [0x7C, 0x05] + [UInt8](repeating: 1, count: 1000))) }
        let unit = d.push(packet(51, 1, [0x7C, 0x45, 1], marker: true))
        XCTAssertEqual(unit.first?.damaged, true)
        XCTAssertLessThanOrEqual(unit.first?.bytes.count ?? 0, 10_000)
    }

    /// ffmpeg's RTP muxer packetizes two seconds of libx264 (FU-A above the 1200-byte packets);
    /// the access units reassembled here decode in ffmpeg to every picture, at its size.
    func testFfmpegsRtpPacketizationReassemblesToEveryPicture() throws {
        let socket = loopbackUDPSocket()
        defer { close(socket.fd) }
        let dir = NSTemporaryDirectory() + "avgraph-rtp-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        ffmpeg.arguments = ["ffmpeg", "-v", "error", "-re", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "60",
                            "-c:v", "libx264", "-preset", "ultrafast", "-g", "30", "-pix_fmt", "yuv420p",
                            "-f", "rtp", "-payload_type", "96", "rtp://127.0.0.1:\(socket.port)?pkt_size=1200"]
        try ffmpeg.run()
        var d = H264Depacketizer()
        var units: [H264Depacketizer.AccessUnit] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        var packets = 0
        // Until ffmpeg has exited and the socket is quiet for 0.5 s.
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { if !ffmpeg.isRunning { break } else { continue } }
            packets += 1
            units += d.push(try RtpPacket.parse(Array(buffer[..<n])))
        }
        ffmpeg.waitUntilExit()
        XCTAssertEqual(ffmpeg.terminationStatus, 0)
        XCTAssertEqual(units.count, 60, "\(packets) packets")
        XCTAssertEqual(units.filter(\.isKeyframe).count, 2)
        XCTAssertTrue(units.allSatisfy { !$0.damaged })
        XCTAssertEqual(Set(zip(units, units.dropFirst()).map { $1.timestamp &- $0.timestamp }), [3000], "90 kHz at 30 fps")
        let path = dir + "/out.h264"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(units.flatMap(\.bytes))))
        let frames = try TestSupport.shell(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                                            "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", path])
        XCTAssertEqual(frames.trimmingCharacters(in: .whitespacesAndNewlines), "320,240,60")
    }

    /// A UDP socket on loopback with a 0.5 s receive timeout.
    private func loopbackUDPSocket() -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var size = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &size) } }
        var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // Room for a burst at a keyframe while the test is descheduled.
        var buffer: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
        return (fd, UInt16(bigEndian: address.sin_port))
    }
}
