import AVGraphTransport
import CFFmpeg
import XCTest

/// The pure pieces under the WHIP source: transport-wide feedback read back as the draft
/// says a sender reads it, lip sync from sender reports, RTCP reports, the relay framing.
final class WhipPiecesTests: XCTestCase {
    /// A sender's reading of a feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01 3.1):
    /// each sequence number's arrival in µs, or nil when reported missing.
    static func read(_ p: [UInt8]) -> (base: UInt16, arrivals: [Int64?])? {
        guard p.count >= 20, p[0] & 0x1F == 15, p[1] == 205 else { return nil }
        let base = UInt16(p[12]) << 8 | UInt16(p[13]), count = Int(p[14]) << 8 | Int(p[15])
        let reference = Int64(Int32(bitPattern: UInt32(p[16]) << 24 | UInt32(p[17]) << 16 | UInt32(p[18]) << 8) >> 8) * 64_000
        var symbols: [Int] = [], at = 20
        while symbols.count < count {
            let chunk = Int(p[at]) << 8 | Int(p[at + 1])
            at += 2
            if chunk & 0x8000 == 0 {
                symbols += Array(repeating: chunk >> 13 & 3, count: chunk & 0x1FFF)
            } else if chunk & 0x4000 == 0 {
                symbols += (0..<14).map { chunk >> (13 - $0) & 1 }
            } else {
                symbols += (0..<7).map { chunk >> (12 - 2 * $0) & 3 }
            }
        }
        var time = reference, arrivals: [Int64?] = []
        for s in symbols.prefix(count) {
            switch s {
            case 1: time += Int64(p[at]) * 250; at += 1; arrivals.append(time)
            case 2: time += Int64(Int16(bitPattern: UInt16(p[at]) << 8 | UInt16(p[at + 1]))) * 250; at += 2; arrivals.append(time)
            default: arrivals.append(nil)
            }
        }
        let padding = p[0] & 0x20 != 0 ? Int(p[p.count - 1]) : 0
        XCTAssertEqual(at + padding, p.count, "every byte accounted for")
        XCTAssertEqual((Int(p[2]) << 8 | Int(p[3]) + 1) * 4, p.count, "the length field")
        return (base, arrivals)
    }

    func testTransportFeedbackReadsBackAsSent() throws {
        var feedback = TransportWideFeedback()
        // 60 packets from sequence 65500 (wrapping), every 7th lost, one late by 40 ms (a negative
        // delta after it), arrival 1.5 ms apart.
        var expected: [Int64?] = []
        for i in 0..<60 {
            let arrival = 10.0 + Double(i) * 0.0015 + (i == 20 ? 0.04 : 0)
            if i % 7 == 3 { expected.append(nil); continue }
            expected.append(Int64((arrival * 1e6).rounded()))
            feedback.received(sequence: UInt16(truncatingIfNeeded: 65500 + i), arrival: arrival)
        }
        let packet = try XCTUnwrap(feedback.feedback(sender: 1, media: 2))
        let read = try XCTUnwrap(Self.read(packet))
        XCTAssertEqual(read.base, 65500)
        XCTAssertEqual(read.arrivals.count, 59, "up to the highest that arrived (the 60th was lost)")
        for (got, want) in zip(read.arrivals, expected) {
            XCTAssertEqual(got == nil, want == nil)
            if let got, let want { XCTAssertLessThanOrEqual(abs(got - want), 250, "each arrival to 250 µs") }
        }
        XCTAssertNil(feedback.feedback(sender: 1, media: 2), "nothing new, nothing sent")
        feedback.received(sequence: UInt16(truncatingIfNeeded: 65560), arrival: 10.2)
        let next = try XCTUnwrap(Self.read(try XCTUnwrap(feedback.feedback(sender: 1, media: 2))))
        XCTAssertEqual(next.base, UInt16(truncatingIfNeeded: 65559), "the next feedback starts after the last")
        XCTAssertEqual(next.arrivals.map { $0 == nil }, [true, false], "the 60th reported missing once a later one came")
    }

    func testTransportSequenceFromEitherExtensionForm() {
        var p = RtpPacket(marker: false, payloadType: 96, sequence: 1, timestamp: 0, ssrc: 1, payload: [1])
        p.extensionProfile = 0xBEDE
        p.extensionData = [0x10, 0xAA, 0x31, 0x12, 0x34, 0x00, 0x00, 0x00]  // id 1 (1 byte), id 3 (2 bytes)
        XCTAssertEqual(TransportWideFeedback.sequence(in: p, id: 3), 0x1234)
        XCTAssertNil(TransportWideFeedback.sequence(in: p, id: 5))
        p.extensionProfile = 0x1000
        p.extensionData = [0x03, 0x02, 0xAB, 0xCD]
        XCTAssertEqual(TransportWideFeedback.sequence(in: p, id: 3), 0xABCD)
        p.extensionData = [0x03, 0x09, 0xAB]
        XCTAssertNil(TransportWideFeedback.sequence(in: p, id: 3), "an element past the end")
    }

    /// A flash at 1.000 s (video) and its beep at 1.000 s (audio) of the sender's wallclock,
    /// though the audio arrives 80 ms later and reports 1 s after the video.
    func testLipSyncPlacesStreamsByTheirSenderReports() {
        var sync = RtpLipSync<String>(rates: [90000, 48000], hold: 3)
        sync.awaitMedia(on: 0)
        var out: [RtpLipSync<String>.Released] = []
        out += sync.push(track: 0, ssrc: 10, timestamp: 1000 + 90000, arrival: 5.010, payload: "flash")
        out += sync.push(track: 1, ssrc: 20, timestamp: 7000 + 48000, arrival: 5.090, payload: "beep")
        XCTAssertTrue(out.isEmpty, "held until both reported")
        sync.senderReport(.init(ssrc: 10, ntpSeconds: 100, ntpMiddle: 0, rtpTimestamp: 1000))
        XCTAssertTrue(sync.release(now: 5.5).isEmpty)
        sync.senderReport(.init(ssrc: 20, ntpSeconds: 100, ntpMiddle: 0, rtpTimestamp: 7000))
        out += sync.release(now: 5.6)
        XCTAssertEqual(out.map(\.payload), ["flash", "beep"])
        XCTAssertEqual(out[0].seconds, out[1].seconds, accuracy: 1e-6, "the flash and its beep at one instant")
        out = sync.push(track: 0, ssrc: 10, timestamp: 1000 + 90000 + 3000, arrival: 5.2, payload: "next")
        XCTAssertEqual(out.first?.seconds ?? -1, out.isEmpty ? -1 : 1.0 / 30, accuracy: 1e-6, "released at once after")
    }

    func testLipSyncGivesUpWaitingAfterTheHold() {
        var sync = RtpLipSync<Int>(rates: [90000, 48000], hold: 1)
        XCTAssertTrue(sync.push(track: 1, ssrc: 2, timestamp: 0, arrival: 0, payload: 0).isEmpty)
        XCTAssertTrue(sync.push(track: 1, ssrc: 2, timestamp: 960, arrival: 0.02, payload: 1).isEmpty)
        let out = sync.release(now: 1.01)
        XCTAssertEqual(out.map(\.payload), [0, 1], "no report within the hold: placed by arrival")
        XCTAssertEqual(out[1].seconds, 0.02, accuracy: 1e-6)
    }

    func testSenderReportsAndReceiverReport() {
        // A compound packet: SR (ssrc 0x01020304, NTP 3.5 s, RTP 9000) then an SDES.
        var sr: [UInt8] = [0x80, 200, 0, 6, 1, 2, 3, 4, 0, 0, 0, 3, 0x80, 0, 0, 0, 0, 0, 0x23, 0x28] + [UInt8](repeating: 0, count: 8)
        sr += [0x81, 202, 0, 1, 1, 2, 3, 4]
        let reports = RtcpReports.senderReports(sr)
        XCTAssertEqual(reports, [.init(ssrc: 0x0102_0304, ntpSeconds: 3.5, ntpMiddle: 0x0003_8000, rtpTimestamp: 9000)])
        XCTAssertEqual(RtcpReports.senderReports(Array(sr.prefix(10))), [], "truncated: nothing")
        let rr = RtcpReports.receiverReport(sender: 9, blocks: [.init(ssrc: 0x0102_0304, cumulativeLost: 3, highestSequence: 70000)])
        XCTAssertEqual(rr.count, 32)
        XCTAssertEqual(Array(rr.prefix(4)), [0x81, 201, 0, 7])
        XCTAssertEqual(Array(rr[12..<16]), [0, 0, 0, 3], "cumulative loss")
    }

    /// The relay framing read back by the source's reader: streams, then packets with their times.
    func testMediaFramingReadsBack() throws {
        var bytes = WebRtcMediaFraming.encodeHeader([.init(kind: "video", codec: "vp8", clockRate: 90000, width: 640, height: 360),
                                                     .init(kind: "audio", codec: "opus", clockRate: 48000, channels: 2)])
        bytes += WebRtcMediaFraming.encodePacket(stream: 1, key: true, time: 960, bytes: [1, 2, 3])
        bytes += WebRtcMediaFraming.encodePacket(stream: 0, key: true, time: 3000, bytes: [9, 9])
        var at = 0
        let reader = try WebRtcMediaReader(name: "test") { buffer in
            let n = min(buffer.count, bytes.count - at, 7)  // a few bytes at a time, as a pipe gives them
            for i in 0..<n { buffer[i] = bytes[at + i] }
            at += n
            return n
        }
        XCTAssertEqual(reader.bestStream(AVMEDIA_TYPE_VIDEO), 0)
        XCTAssertEqual(reader.bestStream(AVMEDIA_TYPE_AUDIO), 1)
        XCTAssertEqual(reader.parameters(0).pointee.width, 640)
        XCTAssertEqual(reader.parameters(1).pointee.codec_id, AV_CODEC_ID_OPUS)
        let packet = av_packet_alloc()!
        defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
        XCTAssertTrue(try reader.read(into: packet))
        XCTAssertEqual(packet.pointee.stream_index, 1)
        XCTAssertEqual(packet.pointee.pts, 960)
        XCTAssertEqual(Array(UnsafeBufferPointer(start: packet.pointee.data, count: Int(packet.pointee.size))), [1, 2, 3])
        XCTAssertTrue(try reader.read(into: packet))
        XCTAssertEqual(packet.pointee.pts, 3000)
        XCTAssertFalse(try reader.read(into: packet), "the end")
        XCTAssertThrowsError(try WebRtcMediaReader(name: "x") { _ in 0 }, "no header")
    }

    /// An offer that makes itself the DTLS server (`a=setup:passive`, FFmpeg's WHIP muxer) gets
    /// `a=setup:active`: avgraph the client. Any other gets `passive`.
    func testDtlsRoleFollowsTheOffersSetup() throws {
        func offer(_ setup: String) -> String {
            ["v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0", "m=audio 9 UDP/TLS/RTP/SAVPF 111", "c=IN IP4 0.0.0.0",
             "a=mid:0", "a=sendonly", "a=rtcp-mux", "a=ice-ufrag:abcd", "a=ice-pwd:abcdefghijklmnopqrstuvwx",
             "a=fingerprint:sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":"), "a=setup:\(setup)", "a=rtpmap:111 opus/48000/2"]
                .joined(separator: "\r\n") + "\r\n"
        }
        let local = WebRtcAnswer.Local(ufrag: "u", password: "p", fingerprint: "AA", candidates: [("127.0.0.1", 9)])
        for (setup, role, answered) in [("passive", DtlsSession.Role.client, "active"), ("actpass", .server, "passive"), ("active", .server, "passive")] {
            let answer = try WebRtcAnswer(offer: SessionDescription.parse(offer(setup)), local: local, sessionID: 1)
            XCTAssertEqual(answer.dtlsRole, role, setup)
            XCTAssertTrue(answer.sdp.contains("a=setup:\(answered)\r\n"), answer.sdp)
        }
        XCTAssertThrowsError(try WebRtcAnswer(offer: SessionDescription.parse(offer("holdconn")), local: local, sessionID: 1))
    }
}
