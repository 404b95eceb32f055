import AVGraphTesting
import Foundation
import XCTest

/// `h264 passthrough: auto` at its edges: a phone it cannot splice, one that starts behind its
/// card, and the preview of a run whose source decodes nothing.
extension PassthroughTests {
    /// The phone on `port` behind a privacy card into a passthrough `h264` (and `aac`), recorded to out.mp4.
    static func writeCardPipe(_ name: String, port: Int, assets: String, encoder: String = "", audio: Bool = true, to path: String) {
        CLI.write("""
        pipeline: \(name)
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, size: 720x1280, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png}
          video:   {type: h264, in: privacy, passthrough: auto, preset: ultrafast, \(encoder.isEmpty ? "" : encoder + ", ")queue: {size: 60}}
        \(audio ? "  audio:   {type: aac, in: src.audio}\n" : "")  out:     {type: file, in: [video\(audio ? ", audio" : "")], path: out.mp4}
        """, to: path)
    }

    /// A phone whose encoder uses B-frames sends pictures out of order: its packets cannot be
    /// forwarded one picture at a time, so the source decodes every picture (saying so once) and
    /// the encoder encodes them all (saying why); the recording is still every picture, in
    /// place, with the card where the switch put it.
    func testAPhoneWithBFramesIsDecodedAndEncodedWhole() throws {
        let seconds = 10
        let dir = CLI.scratch()
        let flv = dir + "/phone.flv"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=720x1280:r=30:d=\(seconds)",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=\(seconds)", "-c:v", "libx264", "-preset", "ultrafast",
                           "-profile:v", "main", "-g", "60", "-keyint_min", "60", "-sc_threshold", "0", "-bf", "2",
                           "-b:v", "2500k", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", flv])
        let port = try LoopbackPort.free()
        let assets = CLI.packageRoot + "/assets"
        Self.writeCardPipe("bframes", port: port, assets: assets, encoder: "crf: 18", to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        let span = (on: 90, off: 200)
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone",
                                    "--privacy", "\(span.on * 100 / 3)ms:\((span.off - span.on) * 100 / 3)ms"], timeout: 40)
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)

        let warnings = run.events.filter { $0["event"] as? String == "warning" }
        let said = { (node: String) in warnings.filter { $0["node"] as? String == node }.compactMap { $0["message"] as? String } }
        XCTAssertEqual(said("src").filter { $0.contains("reorders its pictures (B-frames): every picture is decoded") }.count, 1, "\(warnings)")
        XCTAssertEqual(said("video").filter { $0.contains("passthrough") }.count, 1, "\(warnings)")
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        XCTAssertEqual(account["passed"] as? Int, 0)
        XCTAssertEqual(account["encoded"] as? Int, seconds * 30)

        let recording = dir + "/out.mp4"
        try assertPlaysEverywhere(recording, pictures: seconds * 30, browser: false)
        let shown = try HlsWitness.grayPictures(recording, width: 90, height: 160)
        let original = try HlsWitness.grayPictures(flv, width: 90, height: 160)
        XCTAssertEqual(shown.count, seconds * 30, "every picture recorded")
        XCTAssertEqual(original.count, seconds * 30)
        // The switch's times are the stream's (FLV timestamps: decoding times); with B-frames a
        // picture is shown later than it is sent (here the first at 0.067 s), so the card covers
        // the pictures *shown* from the switch on: picture k's presentation time is what counts.
        let shownAt = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time", "-of", "csv=p=0", flv])
            .split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: CharacterSet(charactersIn: ", "))) }
        XCTAssertEqual(shownAt.count, seconds * 30)
        let (on, off) = (Double(span.on) / 30, Double(span.off) / 30)
        let hidden = shownAt.indices.filter { shownAt[$0] >= on - 0.001 && shownAt[$0] < off - 0.001 }
        XCTAssertEqual(hidden.first, 88, "the picture shown at 3.000 s: \(shownAt[85...90])")
        var worstSource = 0.0, bestCard = Double.infinity
        for k in 0..<min(shown.count, original.count) {
            let d = Self.meanDistance(shown[k], original[k])
            // No keyframe to wait for at the end: every picture is ours.
            if hidden.contains(k) { bestCard = min(bestCard, d) } else { worstSource = max(worstSource, d) }
        }
        XCTAssertLessThan(worstSource, 4, "outside the span every picture is the phone's, at its place")
        XCTAssertGreaterThan(bestCard, 8, "inside the span every picture is hidden")
    }

    /// The operator page's preview of a passthrough run: the source decodes no picture for the
    /// recording, and the preview asks for the pixels of the one it shows (decoded from its
    /// keyframe on request). What it shows is the phone's picture at the media time it names,
    /// and the card inside the span; the recording is still the phone's packets.
    func testThePreviewShowsAPassthroughRunsPicturesDecodedOnRequest() throws {
        let seconds = 10
        let (dir, flv, port, assets) = try Self.phoneScene(seconds: seconds)
        Self.writeCardPipe("passthrough-preview", port: port, assets: assets, audio: false, to: dir + "/p.pipe")
        let http = try LoopbackPort.free()
        var env = ProcessInfo.processInfo.environment
        env["AVGRAPH_KEYS"] = nil
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json", "--http", "127.0.0.1:\(http)"], cwd: dir, environment: env)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        // The card from 4 s on, off at 7 s (the recording keeps it to the phone's keyframe at
        // 8 s; the preview shows what privacy let through: the phone's pictures from 7 s).
        let card = (on: 4.0, off: 7.0)
        let publisher = try Tool.start([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone",
                                        "--privacy", "4000ms:3000ms"])
        defer { publisher.stop() }
        var previews: [(time: Double, gray: [UInt8])] = []
        while publisher.process.isRunning {
            usleep(600_000)
            let headers = dir + "/headers.txt", jpeg = dir + "/preview.jpg"
            let code = try CLI.shell(["curl", "-s", "--max-time", "5", "-D", headers, "-o", jpeg, "-w", "%{http_code}",
                                      "http://127.0.0.1:\(http)/api/preview.jpg"])
            guard code == "200" else { continue }
            let named = try String(contentsOfFile: headers, encoding: .utf8).split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("x-avgraph-media-time:") }
            guard let time = named.flatMap({ Double($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }) else { continue }
            previews.append((time, [UInt8](try CLI.capture(["ffmpeg", "-v", "error", "-i", jpeg, "-vf", "scale=90:160",
                                                           "-pix_fmt", "gray", "-f", "rawvideo", "-"]))))
        }
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        XCTAssertEqual(Self.videoBytes(run, node: "src"), 0, "the source decoded no picture itself")
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        XCTAssertEqual(account["encoded"] as? Int, 120, "the card span alone: the preview's pictures were decoded for it, not encoded")

        let original = try HlsWitness.grayPictures(flv, width: 90, height: 160)
        let cardPicture = try XCTUnwrap(HlsWitness.grayPictures(dir + "/out.mp4", width: 90, height: 160).dropFirst(150).first)
        let hidden = previews.filter { $0.time >= card.on && $0.time < card.off - 0.1 }
        let shown = previews.filter { ($0.time < card.on - 0.1 || $0.time >= card.off + 0.1) && Int(($0.time * 30).rounded()) < original.count }
        print("preview: \(previews.count) pictures, \(hidden.count) in the card span, at \(previews.map { String(format: "%.2f", $0.time) })")
        XCTAssertGreaterThanOrEqual(shown.count, 4, "previews of the phone's pictures")
        XCTAssertGreaterThanOrEqual(hidden.count, 2, "previews inside the card span")
        for p in shown {
            let k = Int((p.time * 30).rounded())
            let d = Self.meanDistance(p.gray, original[k])
            XCTAssertLessThan(d, 6, "the preview at \(p.time) s is the phone's picture \(k)")
            if k + 3 < original.count { XCTAssertLessThan(d, Self.meanDistance(p.gray, original[k + 3]), "at its own place, not three later") }
        }
        for p in hidden { XCTAssertLessThan(Self.meanDistance(p.gray, cardPicture), 6, "the preview at \(p.time) s is the card") }
    }

    /// A phone that starts behind its card (the broadcast began on a password screen): the first
    /// picture the encoder meets is the card, which tells the source's stream all the same, so the
    /// card is ours from the first picture and the phone's packets follow from its keyframe after
    /// the switch went off (was: every picture encoded for the whole run).
    func testAPhoneThatStartsBehindItsCardIsPassedOnAfterIt() throws {
        let seconds = 10
        let (dir, flv, port, assets) = try Self.phoneScene(seconds: seconds)
        Self.writeCardPipe("starts-hidden", port: port, assets: assets, to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone",
                                    "--privacy", "0ms:3000ms"], timeout: 40)
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertEqual(warnings.filter { $0.contains("passthrough") }, [], "passthrough takes the phone's stream")
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        XCTAssertEqual(account["encoded"] as? Int, 120, "the card to the phone's keyframe at 4 s")
        XCTAssertEqual(account["passed"] as? Int, seconds * 30 - 120)
        // The same figures in the last stats and in eos, by node.
        let eos = try XCTUnwrap(run.events.last { $0["event"] as? String == "eos" })
        let atEnd = try XCTUnwrap((eos["figures"] as? [String: [String: Double]])?["video"], "\(eos)")
        XCTAssertEqual(atEnd["passed_through"], Double(seconds * 30 - 120))
        XCTAssertEqual(atEnd["encoded"], 120)
        let stats = try XCTUnwrap(run.events.last { $0["event"] as? String == "stats" })
        let videoStats = (stats["nodes"] as? [[String: Any]])?.first { $0["node"] as? String == "video" }
        XCTAssertEqual(videoStats?["figures"] as? [String: Double], atEnd)
        let recording = dir + "/out.mp4"
        let spans = try Self.assertSpliced(recording, source: flv, switches: [(0, 90)], pictures: seconds * 30)
        XCTAssertEqual(spans.map { "\($0.0)..<\($0.1)" }, ["0..<120"])
        let shown = try HlsWitness.grayPictures(recording, width: 90, height: 160)
        let original = try HlsWitness.grayPictures(flv, width: 90, height: 160)
        XCTAssertEqual(shown.count, seconds * 30)
        for k in 0..<min(shown.count, original.count) {
            let d = Self.meanDistance(shown[k], original[k])
            if k < 120 { XCTAssertGreaterThan(d, 8, "picture \(k) is hidden") } else { XCTAssertEqual(d, 0, "picture \(k) is the phone's") }
        }
        try assertPlaysEverywhere(recording, pictures: seconds * 30, browser: false)
    }
}

