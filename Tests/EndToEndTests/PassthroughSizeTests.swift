import AVGraphTesting
import Foundation
import XCTest

/// `h264 passthrough: auto` follows the size the phone sends (issue 48, point 3): the natural
/// pipeline, with no `size:` on the source (whose default expects 1280x720), passes a portrait
/// phone through at 720x1280, and a phone that turns (a new sequence of another size) is passed
/// through on both sides of each turn, the card encoded at whichever size the phone sends.
final class PassthroughSizeTests: XCTestCase {
    /// ffmpeg publishes an 8 s 720x1280 phone over RTMP to `rtmp` `listen: true` -> `privacy` ->
    /// `h264 passthrough: auto` -> `file`, none told the size; the card on by schedule for half a
    /// second. The recording is 720x1280, the phone's packets byte for byte outside the card span.
    func testNaturalPipelineWithoutSizePassesAPortraitPhoneThroughAtItsOwnSize() throws {
        let seconds = 8, pictures = seconds * 30
        let (dir, flv, port, assets) = try PassthroughTests.phoneScene(seconds: seconds)
        CLI.write("""
        pipeline: passthrough-natural
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png, schedule: [{at: 3s, for: 500ms}]}
          video:   {type: h264, in: privacy, passthrough: auto, preset: ultrafast, queue: {size: 60}}
          audio:   {type: aac, in: src.audio}
          out:     {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let check = try CLI.run(["check", dir + "/p.pipe"])
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        XCTAssertTrue((check.stdout + check.stderr).contains("'video' takes the size of the pictures the source sends (1280x720 is only the size expected)"),
                      check.stdout + check.stderr)

        let run = try startListening(dir + "/p.pipe", in: dir)
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", flv, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0,
                       "ffmpeg's exit status")
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertEqual(warnings.filter { $0.contains("passthrough") }, [], "passthrough takes the phone's stream")
        XCTAssertEqual(PassthroughTests.videoBytes(run, node: "src"), 0, "no picture was decoded")

        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        let passed = account["passed"] as? Int ?? 0, encoded = account["encoded"] as? Int ?? 0
        print("natural passthrough: \(account)")
        XCTAssertGreaterThanOrEqual(passed, 200, "most of the phone's 240 pictures go out as it sent them")
        XCTAssertEqual(passed + encoded, pictures)
        // The schedule is media time from the session's first frame (the phone's first sound may
        // lead its first picture by a frame of audio): the card goes on at picture 90, or one
        // either side, and stays to the phone's keyframe at 120.
        let on = 120 - encoded
        XCTAssertTrue((89...91).contains(on), "the card from about 3 s: \(account)")

        let recording = dir + "/out.mp4"
        let video = try XCTUnwrap(CLI.stream(try CLI.probe(recording), "video"))
        XCTAssertEqual(video["width"] as? Int, 720, "the phone's width, not the 1280 check expected")
        XCTAssertEqual(video["height"] as? Int, 1280)
        // Byte for byte the phone's packets outside the card span; the card (not stretched) inside.
        let spans = try PassthroughTests.assertSpliced(recording, source: flv, switches: [(on, on + 15)], pictures: pictures)
        try PassthroughTests.assertCard(recording, source: flv, spans: spans, assets: assets)
        let sent = try PassthroughTests.packetHashes(flv), recorded = try PassthroughTests.packetHashes(recording)
        print("natural passthrough: \(zip(sent, recorded).filter { $0 == $1 }.count) of \(sent.count) packets the phone's byte for byte, 720x1280")
        XCTAssertEqual(try Tool.run(["ffmpeg", "-v", "error", "-xerror", "-i", recording, "-f", "null", "-"]).stderr, "", "ffmpeg decodes it without an error")
    }

    /// A phone turned twice: 2 s portrait (720x1280), 2 s landscape (1280x720), 2 s portrait, each
    /// part a new sequence header (its SPS of the new size) at a keyframe, a keyframe a second,
    /// published by the specification's publisher with three cards: one across the first turn
    /// (on in portrait, off in landscape), one ending at the second turn, one in the last part.
    /// Every picture outside the cards is the phone's packet, a keyframe that starts a sequence
    /// the decoder does not hold behind its parameter sets in band; every picture decodes at the
    /// size the phone sent it, the cards too.
    func testPhoneTurnedTwiceIsPassedThroughAtEachOfItsSizes() throws {
        try turnedTwice(hevc: false, sizes: ["720x1280", "1280x720", "720x1280"])
    }

    /// The same with `h265 passthrough: auto` and an HEVC phone over Enhanced RTMP (360x640 and
    /// 640x360: x265 encodes every card picture, and this machine is shared).
    func testHevcPhoneTurnedTwiceIsPassedThroughAtEachOfItsSizes() throws {
        try turnedTwice(hevc: true, sizes: ["360x640", "640x360", "360x640"])
    }

    private func turnedTwice(hevc: Bool, sizes: [String]) throws {
        let dir = CLI.scratch()
        var stream = Data()
        for (k, size) in sizes.enumerated() {
            let part = dir + "/part\(k).es"
            let encoder = hevc ? ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "bframes=0:keyint=30:min-keyint=30:scenecut=0:open-gop=0:log-level=error"]
                : ["-c:v", "libx264", "-preset", "ultrafast", "-profile:v", "main", "-g", "30", "-keyint_min", "30", "-sc_threshold", "0", "-bf", "0"]
            _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=\(size):r=30:d=2"] + encoder
                              + ["-b:v", "2500k", "-pix_fmt", "yuv420p", "-f", hevc ? "hevc" : "h264", part])
            stream.append(try Data(contentsOf: URL(fileURLWithPath: part)))
        }
        try stream.write(to: URL(fileURLWithPath: dir + "/turned.es"))
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:r=48000:d=6", "-c:a", "aac", "-f", "adts", dir + "/a.aac"])
        let port = try LoopbackPort.free()
        let assets = CLI.packageRoot + "/assets"
        // Queues that block: x265 encodes every picture of a card (HevcPassthroughTests).
        CLI.write("""
        pipeline: passthrough-turned-twice
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png, queue: {size: 60, policy: block}}
          video:   {type: \(hevc ? "h265" : "h264"), in: privacy, passthrough: auto, preset: ultrafast, queue: {size: 60, policy: block}}
          audio:   {type: aac, in: src.audio}
          out:     {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        // (on, off) in pictures at 30 fps; the turns are at pictures 60 and 120.
        let switches = [(45, 70), (100, 105), (130, 140)]
        let (status, published) = try ErtmpPublisher.publish("rtmp://127.0.0.1:\(port)/live/phone", dir, [
            "--video", dir + "/turned.es", "--codec", hevc ? "hvc1" : "avc1", "--audio", dir + "/a.aac", "--sent", dir + "/sent.bin",
        ] + switches.flatMap { ["--privacy", "\(Int((Double($0.0) * 1000 / 30).rounded())):\(Int((Double($0.1 - $0.0) * 1000 / 30).rounded()) - 1)"] })
        XCTAssertEqual(status, 0, "\(published)")
        XCTAssertEqual(published["headers"] as? Int, 3, "three sequence headers sent: \(published)")
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertEqual(warnings.filter { $0.contains("passthrough") }, [], "passthrough follows the phone across its turns")

        // Spans from each switch on to the phone's first keyframe after it went off (one a second).
        let spans = [(45, 90), (100, 120), (130, 150)]
        let inSpan = { (k: Int) in spans.contains { k >= $0.0 && k < $0.1 } }
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        print("turned twice (\(hevc ? "HEVC" : "H.264")), passthrough: \(account)")
        XCTAssertEqual(account["encoded"] as? Int, 45 + 20 + 20)
        XCTAssertEqual(account["passed"] as? Int, 180 - 85)
        XCTAssertEqual(account["spans"] as? Int, 3)

        // Packets: outside the spans the phone's, byte for byte; the keyframes that start a
        // sequence the decoder does not hold (90: the landscape part, whose parameter sets the
        // header lacks; 120: portrait again after landscape) carry its parameter sets before them.
        let recording = dir + "/out.mp4"
        let sent = try HevcPassthroughTests.sentPackets(dir + "/sent.bin")
        let recorded = try HevcPassthroughTests.recordedPackets(recording)
        XCTAssertEqual(sent.count, 180)
        XCTAssertEqual(recorded.count, sent.count, "every picture recorded, none repeated")
        var same = 0, behindParameterSets: [Int] = []
        for k in 0..<min(sent.count, recorded.count) where !inSpan(k) {
            let bytes = recorded[k].bytes
            if bytes == sent[k] { same += 1; continue }
            guard bytes.count > sent[k].count, Array(bytes.suffix(sent[k].count)) == sent[k] else {
                XCTFail("picture \(k) is not the phone's packet")
                continue
            }
            XCTAssertEqual(Self.unitTypes(Array(bytes.prefix(bytes.count - sent[k].count)), hevc: hevc), hevc ? [32, 33, 34] : [7, 8],
                           "picture \(k): only parameter sets before it")
            behindParameterSets.append(k)
        }
        print("turned twice (\(hevc ? "HEVC" : "H.264")): \(same) packets the phone's byte for byte, \(behindParameterSets) behind their parameter sets, spans \(spans)")
        // HEVC: x265's parameter sets take the phone's ids, so every keyframe the phone's packets
        // resume at after a card carries the phone's again (150 too; HevcPassthroughTests).
        XCTAssertEqual(behindParameterSets, hevc ? [90, 120, 150] : [90, 120])
        XCTAssertEqual(same + behindParameterSets.count, 180 - 85)
        for span in spans { XCTAssertTrue(recorded[span.0].key, "our span at \(span.0) starts with a keyframe") }

        // Decoded: each picture at the size the phone sent it (the cards too), no error.
        let frames = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=width,height", "-of", "csv=p=0", recording])
            .split(separator: "\n").map { $0.split(separator: ",").prefix(2).joined(separator: "x") }  // side data may follow
        let expectedSizes = (0..<180).map { sizes[$0 / 60] }
        XCTAssertEqual(frames.count, 180)
        XCTAssertEqual(frames.enumerated().filter { $0.element != expectedSizes[$0.offset] }.map(\.offset), [], "pictures at another size than the phone's")
        let video = try XCTUnwrap(CLI.stream(try CLI.probe(recording), "video"))
        XCTAssertEqual("\(video["width"] as? Int ?? 0)x\(video["height"] as? Int ?? 0)", sizes[0])
        XCTAssertEqual(try Tool.run(["ffmpeg", "-v", "error", "-xerror", "-i", recording, "-f", "null", "-"]).stderr, "", "ffmpeg decodes it without an error")
        // Outside the spans the phone's pictures exactly; inside, hidden (each scaled to one small size).
        let shown = try HlsWitness.grayPictures(recording, width: 64, height: 64)
        let original = try HlsWitness.grayPictures(dir + "/turned.es", width: 64, height: 64)
        XCTAssertEqual(shown.count, original.count)
        var worstSource = 0.0
        for k in 0..<min(shown.count, original.count) {
            if inSpan(k) {
                XCTAssertGreaterThan(PassthroughTests.meanDistance(shown[k], original[k]), 8, "picture \(k) is hidden")
            } else {
                worstSource = max(worstSource, PassthroughTests.meanDistance(shown[k], original[k]))
            }
        }
        XCTAssertEqual(worstSource, 0, "the phone's pictures decode exactly as sent, at both sizes")
    }

    /// NAL unit types of a packet whose units are behind 4-byte lengths (H.264's, or HEVC's).
    static func unitTypes(_ bytes: [UInt8], hevc: Bool) -> [Int] {
        var types: [Int] = [], i = 0
        while i + 4 <= bytes.count {
            let length = bytes[i..<i + 4].reduce(0) { $0 << 8 | Int($1) }
            i += 4
            guard length > 0, i + length <= bytes.count else { return types + [-1] }
            types.append(hevc ? Int(bytes[i] >> 1) & 0x3F : Int(bytes[i] & 0x1F))
            i += length
        }
        return types
    }

    /// `check` says where a fixed size is needed: a `resize` before a passthrough encoder fixes
    /// the size (every picture is then encoded), and an `hls` ladder refuses a rendition whose
    /// size follows the phone.
    func testCheckSaysWhereAFixedSizeIsNeeded() throws {
        let dir = CLI.scratch()
        CLI.write("""
        pipeline: resized
        nodes:
          src:   {type: rtmp, listen: true, url: "rtmp://127.0.0.1:1935/live/phone"}
          fit:   {type: resize, in: src.video, size: 1280x720}
          video: {type: h264, in: fit, passthrough: auto}
          out:   {type: file, in: [video], path: out.mp4}
        """, to: dir + "/resized.pipe")
        let resized = try CLI.run(["check", dir + "/resized.pipe"])
        XCTAssertEqual(resized.status, 0, resized.stdout + resized.stderr)
        XCTAssertTrue((resized.stdout + resized.stderr).contains("'fit' fixes the picture size (1280x720), so 'video' encodes every picture at it"),
                      resized.stdout + resized.stderr)
        CLI.write("""
        pipeline: ladder
        nodes:
          src:   {type: rtmp, listen: true, url: "rtmp://127.0.0.1:1935/live/phone"}
          small: {type: resize, in: src.video, size: 640x360}
          low:   {type: h264, in: small, keyframes: fixed, gop: 60}
          video: {type: h264, in: src.video, passthrough: auto}
          out:   {type: hls, in: [video, low], path: hls/master.m3u8}
        """, to: dir + "/ladder.pipe")
        let ladder = try CLI.run(["check", dir + "/ladder.pipe"])
        XCTAssertEqual(ladder.status, 1, ladder.stdout + ladder.stderr)
        XCTAssertTrue((ladder.stdout + ladder.stderr).contains("'video' passes the source's pictures on at the size they are sent in, but a ladder's renditions need fixed sizes"),
                      ladder.stdout + ladder.stderr)
    }
}
