import AVGraphTransport
import XCTest

/// The pure pieces under the `whep` sink: H.264 packetized and read back by the depacketizer the
/// WHIP side uses (itself tested against ffmpeg's packetizer), the answer's choice of format, and
/// RTCP as a sender reads what viewers send and writes its reports.
final class WhepPiecesTests: XCTestCase {
    static let sps: [UInt8] = [0x67, 0x64, 0x00, 0x1F, 0xAC, 0xD9, 0x40, 0x50]
    static let pps: [UInt8] = [0x68, 0xEB, 0xE3, 0xCB]

    /// An IDR of `size` bytes and a P picture, as Annex B (x264) and as 4-byte lengths (a phone's avcC).
    static func idr(_ size: Int) -> [UInt8] { [0x65] + (0..<(size - 1)).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) } }

    func roundTrip(_ accessUnit: [UInt8], lengthSize: Int? = 4, parameterSets: [[UInt8]]) -> (payloads: [[UInt8]], back: [H264Depacketizer.AccessUnit]) {
        let (payloads, _) = accessUnit.withUnsafeBytes { H264Packetizer.payloads($0, lengthSize: lengthSize, parameterSets: parameterSets) }
        var depacketizer = H264Depacketizer()
        var back: [H264Depacketizer.AccessUnit] = []
        for (i, p) in payloads.enumerated() {
            back += depacketizer.push(RtpPacket(marker: i == payloads.count - 1, payloadType: 102, sequence: UInt16(i), timestamp: 9000, ssrc: 1, payload: p[...]))
        }
        return (payloads, back)
    }

    func testAKeyframeWithoutItsParameterSetsGetsThemAsOneStapAAndFragmentsReadBackWhole() {
        let idr = Self.idr(5000)
        let (payloads, back) = roundTrip([0, 0, 0, 1] + idr, lengthSize: nil, parameterSets: [Self.sps, Self.pps])
        XCTAssertEqual(payloads.first?.first.map { $0 & 0x1F }, 24, "SPS and PPS first, as one STAP-A")
        XCTAssertTrue(payloads.dropFirst().allSatisfy { $0.first! & 0x1F == 28 }, "the IDR in FU-A fragments")
        XCTAssertTrue(payloads.allSatisfy { $0.count <= H264Packetizer.maxPayload }, "each payload fits a 1200-byte datagram")
        XCTAssertEqual(back.count, 1)
        XCTAssertEqual(back.first?.bytes, [0, 0, 0, 1] + Self.sps + [0, 0, 0, 1] + Self.pps + [0, 0, 0, 1] + idr, "the same units, in order")
        XCTAssertEqual(back.first?.isKeyframe, true)
        XCTAssertEqual(back.first?.damaged, false)
    }

    func testLengthPrefixedUnitsAndSetsInBandAreSentAsTheyAre() {
        let slice: [UInt8] = [0x41, 1, 2, 3, 4]
        func prefixed(_ u: [UInt8]) -> [UInt8] { [0, 0, 0, UInt8(u.count)] + u }
        let (payloads, back) = roundTrip(prefixed(Self.sps) + prefixed(Self.pps) + prefixed(Self.idr(100)), parameterSets: [Self.sps, Self.pps])
        XCTAssertEqual(payloads.map { $0.first! & 0x1F }, [7, 8, 5], "sets in band: nothing added, each unit whole")
        XCTAssertEqual(back.first?.bytes, [0, 0, 0, 1] + Self.sps + [0, 0, 0, 1] + Self.pps + [0, 0, 0, 1] + Self.idr(100))
        // A unit of 256 to 511 bytes: its length, 00 00 01 xx, is not a start code (a phone's stream read as Annex B broke here).
        let long: [UInt8] = [0x41] + Array(repeating: 7, count: 299)
        XCTAssertEqual(roundTrip([0, 0, 1, 44] + long, parameterSets: []).payloads, [long])
        let (p, b) = roundTrip(prefixed(slice), parameterSets: [Self.sps, Self.pps])
        XCTAssertEqual(p, [slice], "a P picture: no sets put in front")
        XCTAssertEqual(b.first?.isKeyframe, false)
        // An access unit delimiter is of no use over RTP; a length past the end ends the reading.
        let (q, _) = roundTrip([0, 0, 0, 2, 0x09, 0x10] + prefixed(slice) + [0, 0, 1, 0], parameterSets: [])
        XCTAssertEqual(q, [slice])
    }

    func testTheAnswerTakesTheOfferedProfileThatMatches() throws {
        let offer = try SessionDescription.parse([
            "v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0 1",
            "m=video 9 UDP/TLS/RTP/SAVPF 96 102 106 112", "c=IN IP4 0.0.0.0", "a=mid:0", "a=recvonly", "a=rtcp-mux", "a=ice-ufrag:abcd",
            "a=ice-pwd:abcdefghijklmnopqrstuvwx", "a=fingerprint:sha-256 AB:CD", "a=setup:actpass",
            "a=rtpmap:96 VP8/90000", "a=rtpmap:102 H264/90000", "a=fmtp:102 packetization-mode=0;profile-level-id=640c1f",
            "a=rtpmap:106 H264/90000", "a=fmtp:106 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
            "a=rtpmap:112 H264/90000", "a=fmtp:112 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=64001f",
            "a=rtcp-fb:112 nack", "a=rtcp-fb:112 nack pli", "a=rtcp-fb:112 ccm fir",
            "m=audio 9 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 0.0.0.0", "a=mid:1", "a=recvonly", "a=rtcp-mux", "a=rtpmap:111 opus/48000/2",
        ].joined(separator: "\r\n") + "\r\n")
        let local = WebRtcAnswer.Local(ufrag: "u", password: "p", fingerprint: "EF", candidates: [("127.0.0.1", 9000)])
        let high = try WhepAnswer(offer: offer, local: local, sessionID: 1, sending: [.init(kind: "video", codec: "h264", ssrc: 7, profileLevelID: "64001f"),
                                                                                      .init(kind: "audio", codec: "opus", ssrc: 8)], streamName: "s")
        XCTAssertEqual(high.chosen.map(\.payloadType), [112, 111], "High in mode 1, not mode 0's 102; Opus")
        XCTAssertEqual(high.chosen.first.map { [$0.nack, $0.pli, $0.fir] }, [true, true, true])
        XCTAssertTrue(high.sdp.contains("a=sendonly") && high.sdp.contains("a=ssrc:7 cname:avgraph") && high.sdp.contains("a=ice-lite"), high.sdp)
        let baseline = try WhepAnswer(offer: offer, local: local, sessionID: 1, sending: [.init(kind: "video", codec: "h264", ssrc: 7, profileLevelID: "42e01e")], streamName: "s")
        XCTAssertEqual(baseline.chosen.map(\.payloadType), [106], "constrained baseline; the audio section answered inactive")
        XCTAssertTrue(baseline.sdp.contains("m=audio 0 UDP/TLS/RTP/SAVPF 111\r\n") && baseline.sdp.contains("a=rtpmap:111 opus/48000/2"), baseline.sdp)
        let vp8Only = try SessionDescription.parse([
            "v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0",
            "m=video 9 UDP/TLS/RTP/SAVPF 96", "c=IN IP4 0.0.0.0", "a=mid:0", "a=recvonly", "a=rtcp-mux", "a=ice-ufrag:abcd",
            "a=ice-pwd:abcdefghijklmnopqrstuvwx", "a=fingerprint:sha-256 AB:CD", "a=setup:actpass", "a=rtpmap:96 VP8/90000",
        ].joined(separator: "\r\n") + "\r\n")
        XCTAssertThrowsError(try WhepAnswer(offer: vp8Only, local: local, sessionID: 1, sending: [.init(kind: "video", codec: "h264", ssrc: 7)], streamName: "s")) {
            XCTAssertEqual(($0 as? WebRtcAnswer.Refusal)?.status, 406, "\($0)")
        }
    }

    func testWhatViewersSendBackReadsAsSent() {
        let nack = RtcpFeedback.nack(sender: 1, media: 0xAABB, lost: [100, 101, 103, 130])
        let pli = RtcpFeedback.pli(sender: 1, media: 0xAABB)
        let report = RtcpReports.receiverReport(sender: 1, blocks: [.init(ssrc: 0xAABB, fractionLost: 64, cumulativeLost: -3, highestSequence: 70000,
                                                                          jitter: 12, lastSenderReport: 0x12345678, delaySinceLastReport: 65536)])
        let fir: [UInt8] = [0x84, 206, 0, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xAA, 0xBB, 5, 0, 0, 0]
        let items = RtcpFromViewers.read(report + nack + pli + fir)
        XCTAssertEqual(items, [.reception(.init(ssrc: 0xAABB, fractionLost: 64, cumulativeLost: -3, highestSequence: 70000, jitter: 12,
                                                lastSenderReport: 0x12345678, delaySinceLastReport: 65536)),
                               .nack(media: 0xAABB, lost: [100, 101, 103, 130]), .pictureLoss(media: 0xAABB), .fullIntraRequest(media: 0xAABB)])
        XCTAssertEqual(RtcpFromViewers.read(Array(nack.prefix(10)) + [1, 2]), [], "a truncated packet is not read")
        let sr = RtcpFromViewers.senderReport(ssrc: 9, ntp: 1_800_000_000.25, rtpTimestamp: 1234, packets: 10, octets: 1000)
        let read = RtcpReports.senderReports(sr.bytes)
        XCTAssertEqual(read.first?.rtpTimestamp, 1234)
        XCTAssertEqual(read.first?.ntpSeconds ?? 0, 1_800_000_000.25 + 2_208_988_800, accuracy: 1e-6, "NTP counts from 1900")
        XCTAssertEqual(read.first?.ntpMiddle, sr.middle, "what a receiver report's LSR echoes")
    }
}
