import AVGraphTransport
import Foundation
import XCTest

/// The WebRTC stack of the coming `whip` source, whole, against a WebRTC peer nobody here wrote:
/// aiortc offers H.264 (its libx264 through PyAV), avgraph answers (ICE-lite on one UDP port,
/// DTLS as the server, SRTP), aiortc checks, shakes hands and sends; the pictures avgraph
/// reassembles from SRTP decode in ffmpeg.
final class WebRtcPeerTests: XCTestCase {
    static let sender = """
        import asyncio, json, sys
        from aiortc import RTCPeerConnection, RTCSessionDescription, RTCRtpSender, VideoStreamTrack
        async def main():
            pc = RTCPeerConnection()
            t = pc.addTransceiver(VideoStreamTrack(), direction="sendonly")
            t.setCodecPreferences([c for c in RTCRtpSender.getCapabilities("video").codecs if c.mimeType == "video/H264"])
            await pc.setLocalDescription(await pc.createOffer())
            print(json.dumps({"offer": pc.localDescription.sdp}), flush=True)
            answer = json.loads(sys.stdin.readline())["answer"]
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline)
            stats = await pc.getStats()
            sent = [s for s in stats.values() if s.type == "outbound-rtp"]
            print(json.dumps({"state": pc.connectionState, "packets": sent[0].packetsSent if sent else 0}), flush=True)
            await pc.close()
        asyncio.run(main())
        """

    func testAiortcPublishesH264OverIceDtlsAndSrtp() throws {
        let (fd, port) = SrtpTests.udp(timeout: 50_000)
        defer { close(fd) }
        let certificate = try DtlsCertificate()
        let local = WebRtcAnswer.Local(ufrag: "avgr", password: "avgraph-test-password-0123", fingerprint: certificate.fingerprint,
                                       candidates: [("127.0.0.1", port)])
        let p = Process(), input = Pipe(), output = Pipe(), errors = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", Self.sender]
        p.standardInput = input
        p.standardOutput = output
        p.standardError = errors
        try p.run()
        addTeardownBlock { if p.isRunning { p.terminate() } }
        func line() -> [String: Any] {
            var data = Data()
            while let byte = try? output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data([0x0A]) { data += byte }
            return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        }
        let offer = try XCTUnwrap(line()["offer"] as? String, "aiortc made no offer")
        let answer = try WebRtcAnswer(offer: SessionDescription.parse(offer), local: local, sessionID: 1)
        XCTAssertEqual(answer.chosen.first?.codec.name.lowercased(), "h264")
        let peer = try WebRtcPeer(answer: answer, local: local, certificate: certificate)
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["answer": answer.sdp]) + Data([0x0A]))

        var depacketizer = H264Depacketizer()
        var units: [H264Depacketizer.AccessUnit] = []
        var connectedAfter: Double?, dropped: [String] = [], rtcp = 0
        let start = Date()
        var buffer = [UInt8](repeating: 0, count: 2048)
        while Date().timeIntervalSince(start) < 6 {
            var from = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let n = withUnsafeMutablePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &length) } }
            var events: [WebRtcPeer.Event] = []
            if n > 0 {
                let host = withUnsafeBytes(of: from.sin_addr.s_addr) { Array($0) }
                events = peer.receive(Array(buffer[..<n]), from: .init(host: host, port: in_port_t(bigEndian: from.sin_port)))
            } else if let wait = peer.retransmitIn, wait <= 0 {
                events = peer.retransmit().map { .send($0) }
            }
            for e in events {
                switch e {
                case .send(let bytes):
                    _ = withUnsafePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, bytes, bytes.count, 0, $0, length) } }
                case .connected: connectedAfter = Date().timeIntervalSince(start)
                case .rtp(let packet): if packet.payloadType == answer.chosen.first?.payloadType { units += depacketizer.push(packet) }
                case .rtcp: rtcp += 1
                case .dropped(let why): dropped.append(why)
                case .failed(let why): XCTFail("the peer failed: \(why)")
                }
            }
        }
        input.fileHandleForWriting.write(Data([0x0A]))
        let stats = line()
        p.waitUntilExit()
        let path = CLI.scratch() + "/whip.h264"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(units.filter { !$0.damaged }.flatMap(\.bytes))))
        let frames = try CLI.shell(["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", path])
        print("webrtc: aiortc connected \(String(format: "%.2f", connectedAfter ?? -1)) s after its offer, sent \(stats["packets"] ?? "?") packets; "
              + "\(units.count) pictures reassembled (\(units.filter(\.damaged).count) damaged), ffprobe: \(frames.trimmingCharacters(in: .whitespacesAndNewlines)); "
              + "\(rtcp) RTCP; dropped: \(Set(dropped))")
        XCTAssertNotNil(connectedAfter, "DTLS completed: \(String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self))")
        XCTAssertEqual(stats["state"] as? String, "connected")
        let decoded = Int(frames.split(separator: ",").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        XCTAssertGreaterThan(decoded, 60, "over 2 s of aiortc's 30 fps decoded from what came over SRTP")
        XCTAssertEqual(decoded, units.filter { !$0.damaged }.count, "every whole picture decodes")
    }
}
