import AVGraphTesting
import Foundation
import XCTest

/// Light nodes on their producers' thread (`Node.sharesProducerThread`): a live passthrough
/// recording runs on its source's thread, and is still steered live like any other.
extension PassthroughTests {
    /// The W8 graph: `privacy`, `h264`/`aac` passing packets on and `file` all run on the `rtmp`
    /// source's thread (eos says so per node). A live switch reaches the privacy node while the
    /// source waits for a publisher (nothing flows: the source's thread is woken for it) and
    /// again mid-stream; the recording is the card from the first picture to the phone's
    /// keyframe after the switch went off, the phone's own packets after it, every picture there.
    func testALiveRecordingRunsOnItsSourcesThreadAndIsSteeredLive() throws {
        let seconds = 10
        let (dir, flv, port, assets) = try Self.phoneScene(seconds: seconds)
        CLI.write("""
        pipeline: shared
        control: \(dir)/ctl.sock
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, size: 720x1280, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png}
          video:   {type: h264, in: privacy, passthrough: auto, preset: ultrafast}
          audio:   {type: aac, in: src.audio, passthrough: auto}
          out:     {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        // Nothing flows yet: the set is taken only if the source's thread is woken for it.
        let asked = Date()
        let on = try CLI.run(["ctl", dir + "/ctl.sock", "set", "privacy.enabled", "true"])
        XCTAssertEqual(on.status, 0, on.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(asked), 1.0, "taken at once, not at the first media")
        let publish = try Tool.start([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone"])
        defer { publish.stop() }
        XCTAssertNotNil(run.waitFor(timeout: 20) { e in
            e["event"] as? String == "stats" && (e["media_time"] as? Double ?? 0) >= 3
        }, run.stderr)
        let off = try CLI.run(["ctl", dir + "/ctl.sock", "set", "privacy.enabled", "false"])
        XCTAssertEqual(off.status, 0, off.stderr)
        let end = Date().addingTimeInterval(40)
        while publish.process.isRunning && Date() < end { usleep(50_000) }
        XCTAssertEqual(publish.process.isRunning ? -1 : publish.process.terminationStatus, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)

        let applied = run.events.filter { $0["event"] as? String == "applied" && $0["node"] as? String == "privacy" }
        XCTAssertEqual(applied.count, 2, "\(applied)")
        let offTime = try XCTUnwrap(applied.last?["media_time"] as? Double)
        XCTAssertGreaterThanOrEqual(offTime, 3)
        XCTAssertLessThan(offTime, 6)
        // The picture the switch went off at: the first at or after its media time.
        let offPicture = Int((offTime * 30 - 1e-6).rounded(.up))
        let spans = try Self.assertSpliced(dir + "/out.mp4", source: flv, switches: [(0, offPicture)], pictures: seconds * 30)
        let encoded = try XCTUnwrap(spans.first).1
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" && $0["node"] as? String == "video" })
        XCTAssertEqual(account["encoded"] as? Int, encoded)
        XCTAssertEqual(account["passed"] as? Int, seconds * 30 - encoded)
        // Where they ran: the source's thread for all four; its CPU counts theirs.
        let eos = try XCTUnwrap(run.events.last { $0["event"] as? String == "eos" })
        let nodes = try XCTUnwrap((eos["cpu"] as? [String: Any])?["nodes"] as? [[String: Any]], "\(eos)")
        let byNode = Dictionary(uniqueKeysWithValues: nodes.map { ($0["node"] as? String ?? "", $0) })
        for name in ["privacy", "video", "audio", "out"] {
            XCTAssertEqual(byNode[name]?["thread"] as? String, "src", "\(name) runs on the source's thread")
            XCTAssertEqual(byNode[name]?["seconds"] as? Double, 0, name)
        }
        XCTAssertNil(byNode["src"]?["thread"])
        XCTAssertGreaterThan(byNode["src"]?["seconds"] as? Double ?? 0, 0)
    }

    /// A node that does not share (`h264` encoding every picture) keeps its own thread, and so
    /// does `file` fed by two threads; `privacy` on its source's thread hides its span all the same.
    func testNodesThatEncodeKeepTheirOwnThreads() throws {
        let dir = CLI.scratch()
        CLI.write("""
        pipeline: own-threads
        duration: 2s
        nodes:
          screen:  {type: testsrc, size: 320x240, rate: 30}
          tone:    {type: tone, freq: 440, rate: 48000}
          privacy: {type: privacy, in: screen, image: \(CLI.packageRoot)/assets/privacy.png, schedule: [{at: 1s, for: 500ms}]}
          video:   {type: h264, in: privacy, preset: ultrafast}
          audio:   {type: aac, in: tone}
          out:     {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let r = try CLI.run(["run", dir + "/p.pipe", "--events", "json"], cwd: dir)
        XCTAssertEqual(r.status, 0, r.stderr)
        let eos = try XCTUnwrap(r.stdout.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        let nodes = try XCTUnwrap((eos["cpu"] as? [String: Any])?["nodes"] as? [[String: Any]], "\(eos)")
        let threads = Dictionary(uniqueKeysWithValues: nodes.map { ($0["node"] as? String ?? "", $0["thread"] as? String ?? "own") })
        XCTAssertEqual(threads, ["screen": "own", "tone": "own", "privacy": "screen", "video": "own", "audio": "own", "out": "own"])
        let probe = try CLI.probe(dir + "/out.mp4")
        XCTAssertEqual(Int(CLI.stream(probe, "video")?["nb_frames"] as? String ?? ""), 60)
        // The card is still, the test pattern moves: pictures 30..<45 are the card's, no other is.
        let frames = try CLI.grayFrames(dir + "/out.mp4", width: 320, height: 240)
        XCTAssertEqual(frames.count, 60)
        guard frames.count == 60 else { return }
        for (i, f) in frames.enumerated() {
            XCTAssertEqual(Self.meanDistance(f, frames[30]) < 2, (30..<45).contains(i), "picture \(i)")
        }
    }
}
