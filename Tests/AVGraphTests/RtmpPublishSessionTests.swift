import AVGraph
import AVGraphTransport
import AVGraphNodes
import CFFmpeg
import Foundation
import XCTest

/// avgraph's RTMP client without a socket: its session talks to the server's own
/// `RtmpConnection` in memory (client bytes to the server, the server's back, cut in uneven
/// pieces as reads deliver them), and what the server then holds as FLV is read back by
/// `FlvTagReader` into the packets that were sent.
final class RtmpPublishSessionTests: XCTestCase {
    /// x264's parameter sets for 640x360, baseline.
    static let sps: [UInt8] = [0x67, 0x42, 0xC0, 0x1E, 0xD9, 0x00, 0xA0, 0x2F, 0xF9, 0x70, 0x11, 0x00, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00,
                               0x03, 0x00, 0x3C, 0x0F, 0x16, 0x2E, 0x48]
    static let pps: [UInt8] = [0x68, 0xCB, 0x83, 0xCB, 0x20]

    private func server(keys: [String] = ["phone"]) throws -> RtmpConnection {
        RtmpConnection(policy: try RtmpPolicy(app: "live", keys: keys))
    }

    /// Moves bytes both ways until neither side has any left, in pieces of 1 to 700 bytes.
    private func pump(_ client: RtmpPublishSession, _ server: RtmpConnection, rounds: Int = 50) {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<rounds {
            var moved = false
            while !client.output.isEmpty {
                let n = min(client.output.count, Int.random(in: 1...700, using: &generator))
                let piece = Array(client.output.prefix(n))
                client.output.removeFirst(n)
                piece.withUnsafeBytes { server.receive($0) }
                server.acknowledgeIfDue()
                moved = true
            }
            while !server.output.isEmpty {
                let piece = server.output
                server.output = []
                piece.withUnsafeBytes { client.receive($0) }
                moved = true
            }
            if !moved { return }
        }
    }

    /// The FLV a server holds, read as a network source reads it.
    private func reading(_ bytes: [UInt8]) throws -> FlvTagReader {
        var flv = bytes[...]
        return try FlvTagReader(name: "test", warn: { XCTFail($0) }) { buffer in
            let n = min(buffer.count, flv.count)
            buffer.copyBytes(from: flv.prefix(n))
            flv = flv.dropFirst(n)
            return n
        }
    }

    func testClientPublishesToOurServerWhichHoldsTheSamePacketsAsFlv() throws {
        let client = RtmpPublishSession(address: try RtmpAddress("rtmp://127.0.0.1:1935/live/phone"))
        let server = try server()
        pump(client, server)
        XCTAssertEqual(client.phase, .publishing, "\(client.failure?.description ?? "")")
        XCTAssertTrue(server.admitted)
        XCTAssertTrue(client.serverTakes("hvc1"), "our server lists hvc1: \(client.serverVideoFourCCs ?? [])")
        let record = try FlvRecords.avc([0, 0, 0, 1] + Self.sps + [0, 0, 0, 1] + Self.pps)
        let aac: [UInt8] = [0x11, 0x90]  // AAC LC, 48 kHz, stereo
        client.send(type: 18, timestamp: 0, payload: FlvTagWriter.metadata(video: (.h264, 640, 360, 0), audio: (48000, 2)))
        client.send(type: 9, timestamp: 0, payload: FlvTagWriter.videoSequenceStart(.h264, record: record))
        client.send(type: 8, timestamp: 0, payload: FlvTagWriter.aacSequenceStart(config: aac))
        // Pictures over several chunks, B-frame composition times, a keyframe every 10; the last
        // ones past 0xFFFFFF ms (4.6 hours: the extended timestamp).
        var sent: [(time: Int64, cts: Int64, key: Bool, bytes: [UInt8])] = []
        var audio: [(time: Int64, bytes: [UInt8])] = []
        let times = (0..<40).map { Int64($0) * 33 } + (0..<5).map { 0xFF_FFF0 + Int64($0) * 33 }
        for (k, t) in times.enumerated() {
            let nal: [UInt8] = [k % 10 == 0 ? 0x65 : 0x41] + (0..<(k % 10 == 0 ? 9000 : 700)).map { _ in UInt8.random(in: 0...255) }
            let annexB: [UInt8] = [0, 0, 0, 1] + nal
            let units = FlvRecords.lengthPrefixed(annexB: annexB[...])
            let cts = Int64(k % 3) * 33
            client.send(type: 9, timestamp: UInt32(t), payload: FlvTagWriter.videoFrame(.h264, units: units, key: k % 10 == 0, compositionTime: Int32(cts)))
            sent.append((t, cts, k % 10 == 0, units))
            let frame = (0..<200).map { _ in UInt8.random(in: 0...255) }
            client.send(type: 8, timestamp: UInt32(t + 5), payload: FlvTagWriter.aacFrame(frame[...]))
            audio.append((t + 5, frame))
            pump(client, server)
        }
        XCTAssertNil(server.refusal)
        let reader = try reading(server.flv)
        let videoIndex = try XCTUnwrap(reader.bestStream(AVMEDIA_TYPE_VIDEO)), audioIndex = try XCTUnwrap(reader.bestStream(AVMEDIA_TYPE_AUDIO))
        let parameters = reader.parameters(videoIndex).pointee
        XCTAssertEqual(Array(UnsafeBufferPointer(start: parameters.extradata, count: Int(parameters.extradata_size))), record)
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        var gotVideo: [(time: Int64, cts: Int64, key: Bool, bytes: [UInt8])] = [], gotAudio: [(time: Int64, bytes: [UInt8])] = []
        while try reader.read(into: packet!) {
            let p = packet!.pointee
            let bytes = Array(UnsafeBufferPointer(start: p.data, count: Int(p.size)))
            if p.stream_index == videoIndex {
                gotVideo.append((p.dts, p.pts - p.dts, p.flags & avg_pkt_flag_key() != 0, bytes))
            } else if p.stream_index == audioIndex {
                gotAudio.append((p.dts, bytes))
            }
        }
        XCTAssertEqual(gotVideo.count, sent.count)
        for (a, b) in zip(gotVideo, sent) {
            XCTAssertEqual(a.time, b.time)
            XCTAssertEqual(a.cts, b.cts)
            XCTAssertEqual(a.key, b.key)
            XCTAssertEqual(a.bytes, b.bytes)
        }
        XCTAssertEqual(gotAudio.map(\.time), audio.map(\.time))
        XCTAssertEqual(gotAudio.map(\.bytes), audio.map(\.bytes))
        // Ending: the server sees the stop and ends the session as a finished publish.
        client.unpublish()
        pump(client, server)
        XCTAssertTrue(server.finished)
    }

    func testAWrongKeyIsRefusedWithTheServersReasonAndNoKeyInIt() throws {
        let client = RtmpPublishSession(address: try RtmpAddress("rtmp://127.0.0.1/live/secret-key?token=1"))
        pump(client, try server())
        XCTAssertEqual(client.phase, .ended)
        let said = client.failure?.description ?? ""
        XCTAssertTrue(said.contains("NetStream.Publish.BadName") && said.contains("unknown stream key"), said)
        XCTAssertFalse(said.contains("secret"), said)
    }

    func testAWrongApplicationIsRefusedAtConnect() throws {
        let client = RtmpPublishSession(address: try RtmpAddress("rtmp://127.0.0.1/other/phone"))
        pump(client, try server())
        let said = client.failure?.description ?? ""
        XCTAssertTrue(said.contains("refused the connection") && said.contains("NetConnection.Connect.Rejected"), said)
    }

    func testChunkWriterRoundTripsThroughTheReaderWithExtendedTimestamps() throws {
        let writer = RtmpChunkStreamWriter()
        let reader = RtmpChunkReader(maxMessageSize: 1 << 20)
        // Set Chunk Size 4096, as a server sends it (format 0, chunk stream 2).
        var bytes: [UInt8] = [0x02, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0x10, 0]
        writer.chunkSize = 4096
        var messages: [(RtmpMessage, UInt32)] = []
        var clock: [UInt32: UInt32] = [4: 0, 6: 0, 300: 0, 65000: 0]
        for k in 0..<200 {
            let csid = [4, 6, 300, 65000][k % 4] as UInt32
            // Small steps, repeated sizes (formats 1 and 2), a jump past 0xFFFFFF (an extended delta) and
            // a step back (format 0 again).
            let step: UInt32 = k == 101 ? 0x100_0000 : k == 150 ? 0 : UInt32(k % 5 * 20)
            clock[csid] = k == 150 ? 10 : clock[csid]! &+ step
            let size = k % 7 == 0 ? 10000 : k % 2 == 0 ? 300 : 300 + k
            let m = RtmpMessage(type: k % 3 == 0 ? 8 : 9, streamID: 1, timestamp: clock[csid]!, payload: (0..<size).map { _ in UInt8.random(in: 0...255) })
            messages.append((m, csid))
            bytes += writer.chunks(m, csid: csid)
        }
        var read: [RtmpMessage] = []
        var at = 0
        while at < bytes.count {
            let n = min(bytes.count - at, Int.random(in: 1...5000))
            read += try bytes[at..<at + n].withUnsafeBytes { try reader.feed($0) }
            at += n
        }
        read.removeFirst()  // Set Chunk Size
        XCTAssertEqual(read.count, messages.count)
        for (got, (sent, _)) in zip(read, messages) {
            XCTAssertEqual(got.timestamp, sent.timestamp)
            XCTAssertEqual(got.type, sent.type)
            XCTAssertEqual(got.streamID, sent.streamID)
            XCTAssertEqual(got.payload, sent.payload)
        }
        XCTAssertTrue(messages.contains { $0.0.timestamp > 0xFF_FFFF }, "extended timestamps were written")
        // A repeated header costs a byte or four, not twelve.
        let again = writer.chunks(RtmpMessage(type: 9, streamID: 1, timestamp: 0x200_0000, payload: [1]), csid: 9)
        let next = writer.chunks(RtmpMessage(type: 9, streamID: 1, timestamp: 0x200_0010, payload: [2]), csid: 9)
        XCTAssertEqual(again.count, 1 + 11 + 4 + 1, "format 0 with an extended timestamp")
        XCTAssertEqual(next.count, 1 + 3 + 1, "format 2: the delta alone")
    }

    func testAnnexBParameterSetsBecomeAnAvcRecordAndARecordStaysAsItIs() throws {
        let record = try FlvRecords.avc([0, 0, 0, 1] + Self.sps + [0, 0, 1] + Self.pps + [0, 0])
        // Version, the SPS's profile, compatibility and level, 4-byte lengths, one SPS, one PPS.
        XCTAssertEqual(record, [1, 0x42, 0xC0, 0x1E, 0xFF, 0xE1, 0, UInt8(Self.sps.count)] + Self.sps + [1, 0, UInt8(Self.pps.count)] + Self.pps)
        XCTAssertEqual(try FlvRecords.avc(record), record, "a record goes as it is")
        XCTAssertThrowsError(try FlvRecords.avc([0, 0, 0, 1] + Self.pps)) { error in
            XCTAssertTrue("\(error)".contains("no SPS and PPS"), "\(error)")
        }
        // A picture's NAL units behind 4-byte lengths (a 3- and a 4-byte start code).
        let units = FlvRecords.lengthPrefixed(annexB: ([0, 0, 0, 1, 0x06, 5] + [0, 0, 1, 0x65, 1, 2, 3])[...])
        XCTAssertEqual(units, [0, 0, 0, 2, 0x06, 5, 0, 0, 0, 4, 0x65, 1, 2, 3])
        // Legacy AVC: keyframe (1) and codec 7, AVC NALU (1), composition time as SI24.
        XCTAssertEqual(FlvTagWriter.videoFrame(.h264, units: units, key: true, compositionTime: -33), [0x17, 1, 0xFF, 0xFF, 0xDF] + units)
        // Enhanced RTMP: IsExHeader, inter frame (2), CodedFrames (1) with its SI24, or CodedFramesX (3) without.
        XCTAssertEqual(FlvTagWriter.videoFrame(.hevc, units: units, key: false, compositionTime: 66), [0xA1] + Array("hvc1".utf8) + [0, 0, 66] + units)
        XCTAssertEqual(FlvTagWriter.videoFrame(.hevc, units: units, key: true, compositionTime: 0), [0x93] + Array("hvc1".utf8) + units)
        XCTAssertEqual(FlvTagWriter.videoSequenceStart(.hevc, record: [1, 2]), [0x90] + Array("hvc1".utf8) + [1, 2])
    }

    /// x265's VPS, SPS and PPS (320x240, Main) and the hvcC FFmpeg 8.1's mp4 muxer made of them.
    static let hevcSets: [[UInt8]] = [
        [0x40, 0x01, 0x0C, 0x01, 0xFF, 0xFF, 0x01, 0x60, 0x00, 0x00, 0x03, 0x00, 0x90, 0x00, 0x00, 0x03, 0x00, 0x00, 0x03, 0x00, 0x3C, 0x95, 0x98, 0x09],
        [0x42, 0x01, 0x01, 0x01, 0x60, 0x00, 0x00, 0x03, 0x00, 0x90, 0x00, 0x00, 0x03, 0x00, 0x00, 0x03, 0x00, 0x3C, 0xA0, 0x0A, 0x08, 0x0F, 0x16,
         0x59, 0x59, 0xA4, 0x93, 0x2B, 0xC0, 0x5A, 0x02, 0x00, 0x00, 0x03, 0x00, 0x02, 0x00, 0x00, 0x03, 0x00, 0x3C, 0x10],
        [0x44, 0x01, 0xC1, 0x72, 0xB4, 0x62, 0x40],
    ]
    static let ffmpegHeader: [UInt8] = [0x01, 0x01, 0x60, 0x00, 0x00, 0x00, 0x90, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3C, 0xF0, 0x00, 0xFC, 0xFD, 0xF8, 0xF8,
                                        0x00, 0x00, 0x0F, 0x03]

    func testHevcParameterSetsBecomeTheHvcCFfmpegWritesAndTravelAsEnhancedRtmpToOurServer() throws {
        let annexB: [UInt8] = Self.hevcSets.flatMap { [0, 0, 0, 1] + $0 }
        let record = try FlvRecords.hevc(annexB)
        var expected = Self.ffmpegHeader
        for (type, set) in zip([0xA0, 0xA1, 0xA2] as [UInt8], Self.hevcSets) { expected += [type, 0, 1, 0, UInt8(set.count)] + set }
        XCTAssertEqual(record, expected, "the record FFmpeg writes for the same parameter sets")
        XCTAssertEqual(try FlvRecords.hevc(record), record)

        let client = RtmpPublishSession(address: try RtmpAddress("rtmp://127.0.0.1/live/phone"))
        let server = try server()
        pump(client, server)
        XCTAssertEqual(client.phase, .publishing)
        client.send(type: 9, timestamp: 0, payload: FlvTagWriter.videoSequenceStart(.hevc, record: record))
        let pictures: [(cts: Int32, key: Bool, units: [UInt8])] = (0..<30).map { k in
            let nal: [UInt8] = [k == 0 ? 0x26 : 0x02, 0x01] + (0..<(k == 0 ? 6000 : 500)).map { _ in UInt8.random(in: 0...255) }
            return (Int32(k % 2) * 33, k == 0, [0, 0, UInt8(nal.count >> 8), UInt8(nal.count & 0xFF)] + nal)
        }
        for (k, p) in pictures.enumerated() {
            client.send(type: 9, timestamp: UInt32(k * 33), payload: FlvTagWriter.videoFrame(.hevc, units: p.units, key: p.key, compositionTime: p.cts))
        }
        pump(client, server)
        XCTAssertNil(server.refusal)
        let reader = try reading(server.flv)
        let index = try XCTUnwrap(reader.bestStream(AVMEDIA_TYPE_VIDEO))
        let parameters = reader.parameters(index).pointee
        XCTAssertEqual(parameters.codec_id, AV_CODEC_ID_HEVC)
        XCTAssertEqual([Int(parameters.width), Int(parameters.height)], [320, 240], "the size the SPS in the record says")
        var packet: UnsafeMutablePointer<AVPacket>? = av_packet_alloc()
        defer { av_packet_free(&packet) }
        var got: [(cts: Int32, key: Bool, units: [UInt8])] = []
        while try reader.read(into: packet!) {
            let p = packet!.pointee
            got.append((Int32(p.pts - p.dts), p.flags & avg_pkt_flag_key() != 0, Array(UnsafeBufferPointer(start: p.data, count: Int(p.size)))))
        }
        XCTAssertEqual(got.count, pictures.count)
        XCTAssertTrue(zip(got, pictures).allSatisfy { $0.cts == $1.cts && $0.key == $1.key && $0.units == $1.units }, "each picture as sent")
    }

    /// AMF0 as a server writes it: strings, numbers, objects, strict arrays (what a connect result holds).
    private func amf(_ values: [Any]) -> [UInt8] {
        func string(_ s: String) -> [UInt8] { let b = Array(s.utf8); return [UInt8(b.count >> 8), UInt8(b.count & 0xFF)] + b }
        var out: [UInt8] = []
        for v in values {
            switch v {
            case let s as String: out += [2] + string(s)
            case let n as Double: out += [0] + withUnsafeBytes(of: n.bitPattern.bigEndian, Array.init)
            case let list as [String]: out += [0x0A, 0, 0, 0, UInt8(list.count)] + list.flatMap { [2] + string($0) }
            case let pairs as KeyValuePairs<String, Any>: out += [3] + pairs.flatMap { string($0.key) + amf([$0.value]) } + [0, 0, 9]
            default: XCTFail("\(v)")
            }
        }
        return out
    }

    /// The connect result a server sends (after S0, S1, S2), with or without Enhanced RTMP's codec list.
    private func connected(_ properties: KeyValuePairs<String, Any>) throws -> RtmpPublishSession {
        let client = RtmpPublishSession(address: try RtmpAddress("rtmp://127.0.0.1/live/phone"))
        client.output = []
        let writer = RtmpChunkStreamWriter()
        let result = amf(["_result", 1.0, properties, ["code": "NetConnection.Connect.Success"] as KeyValuePairs<String, Any>])
        let bytes = [3] + [UInt8](repeating: 0, count: 3072) + writer.chunks(RtmpMessage(type: 20, streamID: 0, timestamp: 0, payload: result), csid: 3)
        bytes.withUnsafeBytes { client.receive($0) }
        XCTAssertNil(client.failure)
        XCTAssertEqual(client.phase, .commands)
        XCTAssertGreaterThan(client.output.count, 1536 + 100, "C2, connect, then releaseStream, FCPublish, createStream")
        return client
    }

    /// HEVC goes to a server that lists hvc1, or that lists nothing; never to one that lists its codecs without it.
    func testHevcGoesOnlyToAServerThatListsHvc1OrListsNothing() throws {
        XCTAssertFalse(try connected(["fmsVer": "FMS/3,0,1,123", "fourCcList": ["av01", "avc1"]]).serverTakes("hvc1"))
        XCTAssertTrue(try connected(["fmsVer": "FMS/3,0,1,123", "fourCcList": ["av01", "avc1"]]).serverTakes("avc1"))
        XCTAssertTrue(try connected(["fmsVer": "FMS/3,0,1,123", "fourCcList": ["hvc1"]]).serverTakes("hvc1"))
        XCTAssertTrue(try connected(["fmsVer": "FMS/3,0,1,123", "fourCcList": ["*"]]).serverTakes("hvc1"))
        let silent = try connected(["fmsVer": "FMS/3,0,1,123", "capabilities": 31.0])
        XCTAssertNil(silent.serverVideoFourCCs)
        XCTAssertTrue(silent.serverTakes("hvc1"), "a server that says nothing of Enhanced RTMP is sent it (as FFmpeg 8 does)")
    }

    func testAddressesAreReadAsFfmpegReadsThem() throws {
        let a = try RtmpAddress("rtmps://user@live.example.com/app/inst/key?t=1/2")
        XCTAssertEqual([a.host, a.app, a.stream], ["live.example.com", "app/inst", "key?t=1/2"])
        XCTAssertEqual(a.port, 443)
        XCTAssertTrue(a.tls)
        XCTAssertEqual(a.tcUrl, "rtmps://live.example.com:443/app/inst")
        let b = try RtmpAddress("rtmp://[::1]:1936/live/phone")
        XCTAssertEqual([b.host, b.app, b.stream], ["::1", "live", "phone"])
        XCTAssertEqual(b.port, 1936)
        XCTAssertThrowsError(try RtmpAddress("rtmp://host/onlyone"))
        XCTAssertThrowsError(try RtmpAddress("rtmp://host:99999/live/x"))
    }
}
