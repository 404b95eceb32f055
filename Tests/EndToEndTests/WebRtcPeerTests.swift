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
        from aiortc.mediastreams import AudioStreamTrack
        async def main():
            pc = RTCPeerConnection()
            t = pc.addTransceiver(VideoStreamTrack(), direction="sendonly")
            t.setCodecPreferences([c for c in RTCRtpSender.getCapabilities("video").codecs if c.mimeType == "video/" + sys.argv[1]])
            pc.addTransceiver(AudioStreamTrack(), direction="sendonly")
            await pc.setLocalDescription(await pc.createOffer())
            print(json.dumps({"offer": pc.localDescription.sdp}), flush=True)
            answer = json.loads(sys.stdin.readline())["answer"]
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline)
            stats = await pc.getStats()
            sent = {s.kind: s.packetsSent for s in stats.values() if s.type == "outbound-rtp"}
            print(json.dumps({"state": pc.connectionState, "packets": sent}), flush=True)
            await pc.close()
        asyncio.run(main())
        """

    func testAiortcPublishesH264OverIceDtlsAndSrtp() throws {
        let run = try publish(codec: "H264")
        let path = CLI.scratch() + "/whip.h264"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(run.h264.filter { !$0.damaged }.flatMap(\.bytes))))
        try check(run, path: path, whole: run.h264.filter { !$0.damaged }.count, damaged: run.h264.filter(\.damaged).count)
    }

    /// One video packet in 15 thrown away on arrival, as a lossy link would: the reorder buffer
    /// holds the hole, a NACK (RTCP, protected by SRTCP) asks aiortc for it, and its
    /// retransmission fills it before the picture is handed on.
    func testLostPacketsAreAskedForAgainAndTheirPicturesComeWhole() throws {
        let run = try publish(codec: "H264", dropEvery: 15)
        let path = CLI.scratch() + "/nack.h264"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(run.h264.filter { !$0.damaged }.flatMap(\.bytes))))
        print("webrtc nack: \(run.thrown) packets thrown away, \(run.nacks) NACKs sent, \(run.recovered) retransmitted back, \(run.skipped) given up")
        XCTAssertGreaterThan(run.thrown, 10)
        XCTAssertGreaterThanOrEqual(run.recovered, run.thrown - 1, "aiortc sent again what the NACKs named")
        XCTAssertLessThanOrEqual(run.h264.filter(\.damaged).count, 1)
        try check(run, path: path, whole: run.h264.filter { !$0.damaged }.count, damaged: run.h264.filter(\.damaged).count)
    }

    func testAiortcPublishesVp8AndOpusOverIceDtlsAndSrtp() throws {
        let run = try publish(codec: "VP8")
        XCTAssertTrue(run.vp8.first?.isKeyframe == true, "the first frame is a keyframe")
        // IVF: a 32-byte header, then each frame's size and timestamp (little-endian) and bytes.
        func le(_ v: Int, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        let frames = run.vp8.filter { !$0.damaged }
        var ivf = Array("DKIF".utf8) + le(0, 2) + le(32, 2) + Array("VP80".utf8) + le(640, 2) + le(480, 2) + le(90_000, 4) + le(1, 4) + le(frames.count, 4) + le(0, 4)
        for f in frames { ivf += le(f.bytes.count, 4) + le(Int(f.timestamp &- frames[0].timestamp), 8) + f.bytes }
        let path = CLI.scratch() + "/whip.ivf"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(ivf)))
        try check(run, path: path, whole: frames.count, damaged: run.vp8.filter(\.damaged).count)
        // Opus: one packet each 20 ms (RFC 7587), as aiortc sent them.
        let sentAudio = (run.stats["packets"] as? [String: Any])?["audio"] as? Int ?? 0
        print("webrtc: \(run.opus) Opus packets received of \(sentAudio) sent")
        XCTAssertGreaterThan(run.opus, 200, "over 4 s of 20 ms Opus packets")
        XCTAssertGreaterThanOrEqual(run.opus, sentAudio - 5)
    }

    struct Run {
        var h264: [H264Depacketizer.AccessUnit] = []
        var vp8: [Vp8Depacketizer.Frame] = []
        var opus = 0
        var connectedAfter: Double?
        var dropped: [String] = []
        var rtcp = 0
        var stats: [String: Any] = [:]
        var errors = ""
        var thrown = 0, nacks = 0, recovered = 0, skipped = 0
    }

    /// aiortc offers `codec` video and Opus audio for 6 s; what avgraph received, unprotected and reassembled.
    func publish(codec: String, dropEvery: Int = 0) throws -> Run {
        let (fd, port) = SrtpTests.udp(timeout: 50_000)
        defer { close(fd) }
        let certificate = try DtlsCertificate()
        let local = WebRtcAnswer.Local(ufrag: "avgr", password: "avgraph-test-password-0123", fingerprint: certificate.fingerprint,
                                       candidates: [("127.0.0.1", port)])
        let p = Process(), input = Pipe(), output = Pipe(), errors = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", Self.sender, codec]
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
        let video = try XCTUnwrap(answer.chosen.first { $0.kind == "video" }), audio = answer.chosen.first { $0.kind == "audio" }
        XCTAssertEqual(video.codec.name.lowercased(), codec.lowercased())
        XCTAssertEqual(audio?.codec.name.lowercased(), "opus")
        let peer = try WebRtcPeer(answer: answer, local: local, certificate: certificate)
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["answer": answer.sdp]) + Data([0x0A]))

        var run = Run()
        var h264 = H264Depacketizer(), vp8 = Vp8Depacketizer()
        var reorder = RtpReorderBuffer()
        var thrownAway = Set<UInt16>(), everThrown = Set<UInt16>(), lastNack = 0.0, videoPackets = 0, mediaSsrc: UInt32 = 0
        func depacketize(_ packets: [RtpPacket]) {
            for packet in packets {
                if codec == "VP8" { run.vp8 += vp8.push(packet) } else { run.h264 += h264.push(packet) }
            }
        }
        let start = Date()
        var buffer = [UInt8](repeating: 0, count: 2048)
        while Date().timeIntervalSince(start) < 6 {
            var from = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let n = withUnsafeMutablePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &length) } }
            var events: [WebRtcPeer.Event] = []
            // A lossy link, before SRTP sees the packet: its header (in the clear) says video, and which.
            if n >= 12, dropEvery > 0, (128...191).contains(buffer[0]), buffer[1] & 0x7F == video.payloadType {
                let sequence = UInt16(buffer[2]) << 8 | UInt16(buffer[3])
                videoPackets += 1
                if videoPackets % dropEvery == 0 && !thrownAway.contains(sequence) && !everThrown.contains(sequence) {
                    thrownAway.insert(sequence)
                    everThrown.insert(sequence)
                    run.thrown += 1
                    continue
                }
            }
            if n > 0 {
                let host = withUnsafeBytes(of: from.sin_addr.s_addr) { Array($0) }
                events = peer.receive(Array(buffer[..<n]), from: .init(host: host, port: in_port_t(bigEndian: from.sin_port)))
            } else if let wait = peer.retransmitIn, wait <= 0 {
                events = peer.retransmit().map { .send($0) }
            }
            let now = Date().timeIntervalSince(start)
            depacketize(reorder.release(now: now))
            if dropEvery > 0, !reorder.missing.isEmpty, now - lastNack >= 0.05, let outbound = peer.outbound {
                var nack = RtcpFeedback.nack(sender: 1, media: mediaSsrc, lost: reorder.missing)
                try outbound.protectRtcp(&nack)
                _ = withUnsafePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, nack, nack.count, 0, $0, length) } }
                run.nacks += 1
                lastNack = now
            }
            for e in events {
                switch e {
                case .send(let bytes):
                    _ = withUnsafePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, bytes, bytes.count, 0, $0, length) } }
                case .connected: run.connectedAfter = Date().timeIntervalSince(start)
                case .rtp(let packet):
                    if packet.payloadType == video.payloadType {
                        mediaSsrc = packet.ssrc
                        if thrownAway.remove(packet.sequence) != nil { run.recovered += 1 }
                        depacketize(reorder.push(packet, now: now))
                    } else if packet.payloadType == audio?.payloadType {
                        run.opus += 1
                    }
                case .rtcp: run.rtcp += 1
                case .dropped(let why): run.dropped.append(why)
                case .failed(let why): XCTFail("the peer failed: \(why)")
                }
            }
        }
        depacketize(reorder.release(now: .infinity))
        run.skipped = reorder.skipped
        input.fileHandleForWriting.write(Data([0x0A]))
        run.stats = line()
        p.waitUntilExit()
        run.errors = String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self)
        return run
    }

    /// ffprobe decodes every whole picture avgraph reassembled, over 2 s of aiortc's 30 fps.
    func check(_ run: Run, path: String, whole: Int, damaged: Int) throws {
        let frames = try CLI.shell(["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=width,height,nb_read_frames", "-of", "csv=p=0", path])
        print("webrtc: aiortc connected \(String(format: "%.2f", run.connectedAfter ?? -1)) s after its offer, sent \(run.stats["packets"] ?? "?") packets; "
              + "\(whole) pictures reassembled (\(damaged) damaged), ffprobe: \(frames.trimmingCharacters(in: .whitespacesAndNewlines)); "
              + "\(run.rtcp) RTCP; dropped: \(Set(run.dropped))")
        XCTAssertNotNil(run.connectedAfter, "DTLS completed: \(run.errors)")
        XCTAssertEqual(run.stats["state"] as? String, "connected")
        let decoded = Int(frames.split(separator: ",").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        XCTAssertGreaterThan(decoded, 60, "over 2 s of aiortc's 30 fps decoded from what came over SRTP")
        XCTAssertEqual(decoded, whole, "every whole picture decodes")
    }
}
