import Foundation
import XCTest

final class RunBehaviourTests: XCTestCase {
    func testRecordPipeKeepsAudioAndVideoTogether() throws {
        let dir = CLI.scratch()
        try CLI.shell(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-f", "lavfi",
                       "-i", "sine=frequency=440:sample_rate=48000", "-t", "3", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                       "-c:a", "aac", "-shortest", dir + "/in.mp4"])
        let r = try CLI.run(["run", "pipelines/record.pipe", "--set", "src.path=\(dir)/in.mp4", "--set", "out.path=\(dir)/out.mp4"],
                            cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stderr)
        let probe = try CLI.probe(dir + "/out.mp4")
        let v = try XCTUnwrap(CLI.stream(probe, "video")), a = try XCTUnwrap(CLI.stream(probe, "audio"))
        XCTAssertEqual(v["width"] as? Int, 1280)
        let vStart = Double(v["start_time"] as? String ?? "") ?? 9, aStart = Double(a["start_time"] as? String ?? "") ?? 9
        XCTAssertEqual(vStart, aStart, accuracy: 1.0 / 30, "A/V start offset within a frame")
        let vDur = Double(v["duration"] as? String ?? "") ?? 0, aDur = Double(a["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(vDur, 3, accuracy: 0.1)
        XCTAssertEqual(aDur, 3, accuracy: 0.1)
    }

    func testSIGINTLeavesAPlayableFileWithWhatWasRecorded() throws {
        let dir = CLI.scratch()
        CLI.write("""
        realtime: true
        nodes:
          screen: {type: testsrc, size: 180x390, rate: 30}
          app:    {type: tone, rate: 44100, channels: 2}
          fit:    {type: resize, in: screen, size: 640x360}
          video:  {type: h264, in: fit, bitrate: 1M}
          audio:  {type: aac, in: app}
          out:    {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/live.pipe")
        let r = try CLI.run(["run", dir + "/live.pipe"], interruptAfter: 5)
        XCTAssertEqual(r.status, 0, r.stderr)
        let probe = try CLI.probe(dir + "/out.mp4", ["-count_frames"])
        let v = try XCTUnwrap(CLI.stream(probe, "video"))
        let duration = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(duration, 5, accuracy: 1.0)
        XCTAssertGreaterThan(Int(v["nb_read_frames"] as? String ?? "") ?? 0, 100)
    }

    func testUnwritableOutputExitsOneNamingTheSinkAndLeavesNoFile() throws {
        let dir = CLI.scratch()
        let target = dir + "/missing-folder/out.mp4"
        CLI.write("""
        duration: 1s
        nodes:
          screen: {type: testsrc, size: 160x320}
          video:  {type: h264, in: screen}
          record: {type: file, in: [video], path: \(target)}
        """, to: dir + "/bad.pipe")
        let r = try CLI.run(["run", dir + "/bad.pipe"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("record"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target))
        let r2 = try CLI.run(["run", dir + "/bad.pipe", "--set", "record.path=/proc/avgraph-test.mp4"])
        XCTAssertEqual(r2.status, 1)
        XCTAssertTrue(r2.stderr.contains("record"), r2.stderr)
    }

    /// Every shipped pipeline runs (shortened) and writes a file that decodes.
    func testShippedPipelinesRun() throws {
        let dir = CLI.scratch()
        for name in ["live", "record", "privacy-demo"] {
            let out = dir + "/\(name).mp4"
            let r = try CLI.run(["run", "pipelines/\(name).pipe", "--duration", "3s", "--set", "out.path=\(out)"], cwd: CLI.packageRoot)
            XCTAssertEqual(r.status, 0, "\(name): \(r.stderr)")
            let probe = try CLI.probe(out)
            XCTAssertNotNil(CLI.stream(probe, "video"), name)
            XCTAssertNotNil(CLI.stream(probe, "audio"), name)
            let d = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
            XCTAssertEqual(d, 3, accuracy: 0.2, name)
        }
    }

    func testEventsJSONStream() throws {
        let dir = CLI.scratch()
        CLI.write("""
        duration: 1s
        nodes:
          app:   {type: tone}
          level: {type: meter, in: app, interval: 250ms}
          out:   {type: null, in: [level]}
        """, to: dir + "/ev.pipe")
        let r = try CLI.run(["run", dir + "/ev.pipe", "--events", "json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let events = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(events.first?["event"] as? String, "start")
        XCTAssertEqual(events.last?["event"] as? String, "eos")
        let levels = events.filter { $0["event"] as? String == "level" }
        XCTAssertGreaterThanOrEqual(levels.count, 3)
        XCTAssertNotNil(levels.first?["rms"])
    }
}
