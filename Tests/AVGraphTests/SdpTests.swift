import AVGraphTransport
import Foundation
import XCTest

/// SDP offers as WebRTC senders write them, and avgraph's answer: by hand for each rule, and
/// against aiortc (a WebRTC stack nobody here wrote), which must take the answer.
final class SdpTests: XCTestCase {
    static let local = WebRtcAnswer.Local(ufrag: "avgr", password: "0123456789abcdefghijkl",
                                          fingerprint: (0..<32).map { String(format: "%02X", $0) }.joined(separator: ":"),
                                          candidates: [("127.0.0.1", 8189)])

    /// A browser's publishing offer, as Chromium writes it (trimmed of what changes nothing here).
    static let chromiumOffer = """
        v=0
        o=- 4611731400430051336 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS
        m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:Zq3d
        a=ice-pwd:jz2Cbd0kz0Zb4ZXdTDw0bkQT
        a=ice-options:trickle
        a=fingerprint:sha-256 4E:41:7B:1F:4D:51:9C:3B:3B:95:27:4F:4C:8E:2F:A4:9A:27:6B:8E:1A:11:30:5E:29:8D:0E:4E:74:9D:6E:3C
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=sendonly
        a=msid:- 8b5a0b04
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=ssrc:1001 cname:abc
        m=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 45
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:Zq3d
        a=ice-pwd:jz2Cbd0kz0Zb4ZXdTDw0bkQT
        a=fingerprint:sha-256 4E:41:7B:1F:4D:51:9C:3B:3B:95:27:4F:4C:8E:2F:A4:9A:27:6B:8E:1A:11:30:5E:29:8D:0E:4E:74:9D:6E:3C
        a=setup:actpass
        a=mid:1
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=sendonly
        a=rtcp-mux
        a=rtcp-rsize
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:45 AV1/90000
        """.replacingOccurrences(of: "\n", with: "\r\n")

    func testChromiumsOfferGetsOpusAndItsFirstVideoCodecWithFeedback() throws {
        let offer = try SessionDescription.parse(Self.chromiumOffer)
        XCTAssertEqual(offer.bundle, ["0", "1"])
        let answer = try WebRtcAnswer(offer: offer, local: Self.local, sessionID: 1)
        XCTAssertEqual(answer.chosen.map { "\($0.kind) \($0.payloadType) \($0.codec.name)" }, ["audio 111 opus", "video 96 vp8"])
        XCTAssertEqual(answer.remoteUfrag, "Zq3d")
        XCTAssertEqual(answer.remotePassword, "jz2Cbd0kz0Zb4ZXdTDw0bkQT")
        let back = try SessionDescription.parse(answer.sdp)
        XCTAssertTrue(back.sessionAttributes.contains { $0.name == "ice-lite" })
        XCTAssertEqual(back.media.map(\.formats), [[111], [96]])
        XCTAssertEqual(back.media[1].attributes.filter { $0.name == "rtcp-fb" }.compactMap(\.value), ["96 nack", "96 nack pli", "96 transport-cc"])
        XCTAssertEqual(back.media[0].attribute("setup"), "passive")
        XCTAssertTrue(back.media.allSatisfy { $0.has("recvonly") && $0.has("rtcp-mux") })
        XCTAssertEqual(back.media[0].attribute("candidate"), "1 1 udp 2130706431 127.0.0.1 8189 typ host")
    }

    func testH264ModeZeroIsPassedOverAndNoFmtpIsModeOne() throws {
        // Mode 0 first, then VP8: VP8 is taken.
        let modeZero = Self.chromiumOffer.replacingOccurrences(of: "UDP/TLS/RTP/SAVPF 96 97 102 103 45", with: "UDP/TLS/RTP/SAVPF 102 96")
            .replacingOccurrences(of: "packetization-mode=1", with: "packetization-mode=0")
        XCTAssertEqual(try WebRtcAnswer(offer: .parse(modeZero), local: Self.local, sessionID: 1).chosen.last?.codec.name, "vp8")
        // GStreamer's webrtcbin: H.264 with no a=fmtp line at all.
        let noFmtp = Self.chromiumOffer.replacingOccurrences(of: "UDP/TLS/RTP/SAVPF 96 97 102 103 45", with: "UDP/TLS/RTP/SAVPF 102")
            .replacingOccurrences(of: "a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f\r\n", with: "")
        let answer = try WebRtcAnswer(offer: .parse(noFmtp), local: Self.local, sessionID: 1)
        XCTAssertEqual(answer.chosen.last?.codec.name, "h264")
        XCTAssertFalse(answer.sdp.contains("a=fmtp:102"))
    }

    /// `a=extmap:/DIR URI` names no id: the transport-wide extension is not taken, and nothing traps
    /// (`scripts/fuzz sdp` found it: Fuzz/corpus/sdp/extmap-without-id.sdp).
    func testAnExtmapWithoutAnIdIsPassedOver() throws {
        for bad in ["/sendrecv", "/", "x/recvonly", "15"] {
            let offer = Self.chromiumOffer.replacingOccurrences(of: "a=extmap:3 http://www.ietf.org/id/draft-holmer", with: "a=extmap:\(bad) http://www.ietf.org/id/draft-holmer")
            let answer = try WebRtcAnswer(offer: .parse(offer), local: Self.local, sessionID: 1)
            XCTAssertTrue(answer.chosen.allSatisfy { $0.transportWide == nil }, "\(bad): \(answer.chosen)")
        }
        let good = try WebRtcAnswer(offer: .parse(Self.chromiumOffer.replacingOccurrences(of: "a=extmap:3 http://www.ietf.org/id/draft-holmer",
                                                                                            with: "a=extmap:3/sendrecv http://www.ietf.org/id/draft-holmer")),
                                    local: Self.local, sessionID: 1)
        XCTAssertEqual(good.chosen.last?.transportWide, 3, "an id with a direction after it is taken")
    }

    func testRefusalsNameWhatIsWrong() throws {
        func refusal(_ sdp: String) -> WebRtcAnswer.Refusal? {
            do { _ = try WebRtcAnswer(offer: SessionDescription.parse(sdp), local: Self.local, sessionID: 1); return nil } catch let r as WebRtcAnswer.Refusal { return r } catch { return nil }
        }
        let onlyG722 = Self.chromiumOffer.replacingOccurrences(of: "UDP/TLS/RTP/SAVPF 111 63 9 0 8", with: "UDP/TLS/RTP/SAVPF 9")
        XCTAssertEqual(refusal(onlyG722)?.status, 406)
        XCTAssertTrue(refusal(onlyG722)?.description.contains("g722/8000") == true, refusal(onlyG722)?.description ?? "")
        XCTAssertEqual(refusal(Self.chromiumOffer.replacingOccurrences(of: "a=rtcp-mux\r\n", with: ""))?.status, 400)
        XCTAssertEqual(refusal(Self.chromiumOffer.replacingOccurrences(of: "a=group:BUNDLE 0 1", with: "a=group:BUNDLE 0"))?.description,
                       "media section '1' is not in a=group:BUNDLE (avgraph takes BUNDLE only)")
        XCTAssertEqual(refusal(Self.chromiumOffer.replacingOccurrences(of: "a=ice-ufrag:Zq3d\r\n", with: ""))?.description,
                       "the offer has no a=ice-ufrag/a=ice-pwd")
        XCTAssertThrowsError(try SessionDescription.parse("v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 H264\r\n")) { e in
            XCTAssertEqual((e as? SessionDescription.ParseError)?.line, 3)
        }
        XCTAssertThrowsError(try SessionDescription.parse("m=video 9 RTP/AVP 96\r\n")) { e in XCTAssertEqual((e as? SessionDescription.ParseError)?.line, 1) }
        XCTAssertThrowsError(try SessionDescription.parse("v=0\r\nm=video 99999 RTP/AVP 96\r\n"))
        XCTAssertThrowsError(try SessionDescription.parse("v=0\r\nm=video 9 RTP/AVP 300\r\n"))
        XCTAssertThrowsError(try SessionDescription.parse(String(repeating: "a=x\r\n", count: 20000)))
    }

    /// aiortc offers to send video and audio; avgraph's answer must be one it takes.
    func testAiortcTakesTheAnswer() throws {
        let script = """
            import asyncio, json, sys
            from aiortc import RTCPeerConnection, RTCSessionDescription, VideoStreamTrack
            from aiortc.mediastreams import AudioStreamTrack
            async def main():
                pc = RTCPeerConnection()
                pc.addTransceiver(VideoStreamTrack(), direction="sendonly")
                pc.addTransceiver(AudioStreamTrack(), direction="sendonly")
                await pc.setLocalDescription(await pc.createOffer())
                print(json.dumps({"offer": pc.localDescription.sdp}), flush=True)
                answer = json.loads(sys.stdin.readline())["answer"]
                await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
                print(json.dumps({"accepted": [[t.kind, t.currentDirection, [c.mimeType for c in getattr(t, "_codecs", [])]] for t in pc.getTransceivers()]}), flush=True)
                await pc.close()
            asyncio.run(main())
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", script]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = errors
        try p.run()
        let lines = output.fileHandleForReading
        func line() -> [String: Any] {
            var data = Data()
            while let byte = try? lines.read(upToCount: 1), !byte.isEmpty, byte != Data([0x0A]) { data += byte }
            return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        }
        let offerText = try XCTUnwrap(line()["offer"] as? String, String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self))
        let answer = try WebRtcAnswer(offer: SessionDescription.parse(offerText), local: Self.local, sessionID: 7)
        XCTAssertEqual(Set(answer.chosen.map(\.kind)), ["audio", "video"])
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["answer": answer.sdp]) + Data([0x0A]))
        let accepted = line()["accepted"] as? [[Any]]
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        let kinds = (accepted ?? []).map { "\($0[0]) \($0[1])" }
        XCTAssertEqual(kinds, ["video sendonly", "audio sendonly"], "aiortc's transceivers after our answer")
        print("sdp: aiortc offered \(answer.chosen.map { "\($0.kind) \($0.codec.name)" }), took the answer: \(accepted ?? [])")
    }
}
