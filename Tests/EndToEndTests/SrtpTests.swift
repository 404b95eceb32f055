import AVGraph
import AVGraphTransport
import Foundation
import XCTest

/// SRTP through libsrtp2 against an implementation nobody here wrote: FFmpeg's own (`srtp://`,
/// libavformat's srtp.c). ffmpeg protects, avgraph unprotects and reassembles every picture;
/// avgraph protects ffmpeg's plain RTP and ffmpeg, keyed by the SDP's `a=crypto`, decodes it
/// all. A changed byte fails authentication, a packet again fails the replay check.
final class SrtpTests: XCTestCase {
    static let key: [UInt8] = (0..<16).map { UInt8($0 * 7 + 1) }
    static let salt: [UInt8] = (0..<14).map { UInt8($0 * 13 + 5) }
    static var inline: String { Data(key + salt).base64EncodedString() }

    /// A UDP socket on loopback with a receive timeout, and its port.
    static func udp(timeout: Int = 500_000) -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        var wait = timeval(tv_sec: 0, tv_usec: timeout)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        return (fd, Int(in_port_t(bigEndian: a.sin_port)))
    }

    static func ffmpeg(_ args: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-nostdin", "-y"] + args
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    static let source = ["-re", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "60", "-c:v", "libx264", "-preset", "ultrafast",
                         "-g", "30", "-pix_fmt", "yuv420p"]

    /// Every datagram until the sender has exited and the socket is quiet.
    static func receiveAll(_ fd: Int32, while sender: Process, _ each: ([UInt8]) throws -> Void) rethrows {
        var buffer = [UInt8](repeating: 0, count: 2048)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { if sender.isRunning { continue } else { break } }
            try each(Array(buffer[..<n]))
        }
    }

    func testFfmpegsSrtpIsUnprotectedAndEveryPictureReassembled() throws {
        let socket = Self.udp()
        defer { close(socket.fd) }
        let inbound = try SrtpSession(profile: .aes128CmHmacSha1_80, key: Self.key, salt: Self.salt, direction: .inbound)
        let sender = try Self.ffmpeg(Self.source + ["-f", "rtp", "-payload_type", "96", "-srtp_out_suite", "AES_CM_128_HMAC_SHA1_80",
                                                    "-srtp_out_params", Self.inline, "srtp://127.0.0.1:\(socket.port)?pkt_size=1200"])
        var depacketizer = H264Depacketizer()
        var units: [H264Depacketizer.AccessUnit] = []
        var packets = 0, tampered = 0, replayed = 0
        var last: [UInt8] = []
        try Self.receiveAll(socket.fd, while: sender) { datagram in
            packets += 1
            var packet = datagram
            if packets == 10 {
                // One byte changed in the payload: refused, and the genuine packet still taken after it.
                var forged = datagram
                forged[20] ^= 0x01
                XCTAssertThrowsError(try inbound.unprotect(&forged)) { tampered += ($0 as? MediaError)?.description.contains("authentication failed") == true ? 1 : 0 }
            }
            try inbound.unprotect(&packet)
            XCTAssertEqual(packet.count, datagram.count - 10, "the 80-bit tag taken off")
            if packets == 20 {
                var again = last
                XCTAssertThrowsError(try inbound.unprotect(&again)) { replayed += ($0 as? MediaError)?.description.contains("replay") == true ? 1 : 0 }
            }
            last = datagram
            units += depacketizer.push(try RtpPacket.parse(packet))
        }
        sender.waitUntilExit()
        XCTAssertEqual(units.count, 60, "\(packets) packets")
        XCTAssertTrue(units.allSatisfy { !$0.damaged })
        XCTAssertEqual(tampered, 1)
        XCTAssertEqual(replayed, 1)
        let path = CLI.scratch() + "/out.h264"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(units.flatMap(\.bytes))))
        let frames = try CLI.shell(["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", path])
        XCTAssertEqual(frames.trimmingCharacters(in: .whitespacesAndNewlines), "320,240,60")
    }

    func testWhatAvgraphProtectsFfmpegDecodes() throws {
        let dir = CLI.scratch()
        let fromSender = Self.udp(), toReceiver = Self.udp()
        defer { close(fromSender.fd); close(toReceiver.fd) }
        let outbound = try SrtpSession(profile: .aes128CmHmacSha1_80, key: Self.key, salt: Self.salt, direction: .outbound)
        // The plain sender's SDP, pointed at the receiver's port and keyed (RFC 4568's a=crypto, as ffmpeg reads it).
        let sdpPath = dir + "/plain.sdp"
        let plainArgs = Self.source + ["-f", "rtp", "-payload_type", "96", "-sdp_file", sdpPath, "rtp://127.0.0.1:\(fromSender.port)?pkt_size=1200"]
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "1", "-c:v", "libx264",
                           "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-f", "rtp", "-payload_type", "96", "-sdp_file", sdpPath,
                           "rtp://127.0.0.1:\(fromSender.port)"])
        var drain = [UInt8](repeating: 0, count: 2048)
        while drain.withUnsafeMutableBytes({ recv(fromSender.fd, $0.baseAddress, $0.count, 0) }) > 0 {}
        let probe = Self.udp()
        close(probe.fd)
        let receivePort = probe.port
        var sdp = try String(contentsOfFile: sdpPath, encoding: .utf8)
        sdp = sdp.replacingOccurrences(of: "m=video \(fromSender.port) ", with: "m=video \(receivePort) ")
        sdp += "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Self.inline)\n"
        CLI.write(sdp, to: dir + "/keyed.sdp")
        let receiver = try Self.ffmpeg(["-protocol_whitelist", "file,udp,rtp,srtp,crypto", "-i", dir + "/keyed.sdp", "-c", "copy", "-frames:v", "60",
                                        dir + "/out.mkv"])
        defer { if receiver.isRunning { receiver.terminate() } }
        usleep(500_000)
        let sender = try Self.ffmpeg(plainArgs)
        var to = sockaddr_in()
        to.sin_family = sa_family_t(AF_INET)
        to.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        to.sin_port = in_port_t(receivePort).bigEndian
        var sent = 0
        try Self.receiveAll(fromSender.fd, while: sender) { datagram in
            var packet = datagram
            try outbound.protect(&packet)
            XCTAssertEqual(packet.count, datagram.count + 10)
            sent += 1
            _ = withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(toReceiver.fd, packet, packet.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        let end = Date().addingTimeInterval(10)
        while receiver.isRunning && Date() < end { usleep(50_000) }
        if receiver.isRunning { receiver.interrupt() }
        receiver.waitUntilExit()
        let frames = try CLI.shell(["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", dir + "/out.mkv"])
        print("srtp: \(sent) packets protected by avgraph, ffmpeg decoded \(frames.trimmingCharacters(in: .whitespacesAndNewlines))")
        XCTAssertEqual(frames.trimmingCharacters(in: .whitespacesAndNewlines), "320,240,60")
    }

    func testGcmRoundTripsAndRtcpIsProtectedToo() throws {
        let key = [UInt8](repeating: 3, count: 16), salt = [UInt8](repeating: 4, count: 12)
        let out = try SrtpSession(profile: .aeadAes128Gcm, key: key, salt: salt, direction: .outbound)
        let inbound = try SrtpSession(profile: .aeadAes128Gcm, key: key, salt: salt, direction: .inbound)
        let rtp = RtpPacket(marker: true, payloadType: 96, sequence: 7, timestamp: 90_000, ssrc: 0xCAFE, payload: [UInt8](repeating: 9, count: 100)[...]).encoded
        var packet = rtp
        try out.protect(&packet)
        XCTAssertEqual(packet.count, rtp.count + 16, "GCM's 16-byte tag")
        XCTAssertNotEqual(Array(packet[12..<112]), Array(rtp[12...]), "the payload is encrypted")
        try inbound.unprotect(&packet)
        XCTAssertEqual(packet, rtp)
        // A receiver report (RTCP 201, no blocks).
        let rr: [UInt8] = [0x80, 201, 0, 1, 0, 0, 0xCA, 0xFE]
        var report = rr
        try out.protectRtcp(&report)
        try inbound.unprotectRtcp(&report)
        XCTAssertEqual(report, rr)
        XCTAssertThrowsError(try SrtpSession(profile: .aeadAes128Gcm, key: key, salt: [1, 2], direction: .inbound))
    }
}
