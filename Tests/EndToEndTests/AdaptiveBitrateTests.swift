import AVGraphTesting
import Foundation
import XCTest

/// `h264` `adaptive` through a real narrowing uplink: avgraph and nginx-rtmp inside a network
/// namespace whose loopback `tc` shapes to 5 Mbit/s, then 1.5 Mbit/s, then 5 Mbit/s again.
final class AdaptiveBitrateTests: XCTestCase {
    static let ceiling = 4_000_000
    static let floor = 500_000

    /// Noise: x264 needs every bit of the ceiling for it (testsrc compresses far below it).
    static func noiseClip() throws -> String {
        let path = CLI.scratch("noise") + "/noise.mp4"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-nostdin", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30,noise=alls=30:allf=t",
                           "-t", "4", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "14", "-g", "30", path])
        return path
    }

    static func pipe(clip: String, url: String, seconds: Int, adaptive: Bool) -> String {
        """
        pipeline: adaptive
        realtime: true
        duration: \(seconds)s
        nodes:
          screen: {type: file, path: \(clip), loop: true}
          app:    {type: tone, freq: 440, rate: 48000, channels: 2}
          video:  {type: h264, in: screen, bitrate: \(ceiling / 1000)k\(adaptive ? ", adaptive: {min: \(floor / 1000)k}" : "")}
          audio:  {type: aac, in: app, bitrate: 128k}
          live:   {type: rtmp, in: [video, audio], url: "\(url)"}
        """
    }

    typealias Change = (wall: Double, from: Int, to: Int, reason: String)

    /// One adaptive run through a shaped link: `steps` happen at their seconds since the run's start
    /// (each gets the link and the run's control socket); returns every event, the bitrate changes
    /// and the seconds each step ran at.
    func shapedRun(seconds: Int, steps: [(at: Double, act: (_ link: ShapedLink, _ control: String) throws -> Void)]) throws
        -> (events: [[String: Any]], changes: [Change], stepsAt: [Double], nginx: NginxRtmp) {
        try XCTSkipUnless(ShapedLink.isAvailable && NginxRtmp.isAvailable, "needs root, ip, tc and nginx-rtmp")
        let link = try ShapedLink(megabits: 5, port: 1935)
        addTeardownBlock { link.remove() }
        let nginx = try NginxRtmp(port: 1935, in: link)
        addTeardownBlock { nginx.stop() }
        let dir = CLI.scratch()
        CLI.write(Self.pipe(clip: try Self.noiseClip(), url: nginx.url(), seconds: seconds, adaptive: true), to: dir + "/adaptive.pipe")
        XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/events.json", contents: nil))
        let events = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/events.json"))
        let started = Date()
        let run = try link.start([CLI.binary, "run", dir + "/adaptive.pipe", "--events", "json"], output: events)
        addTeardownBlock { if run.isRunning { run.terminate() } }
        func parsed() -> [[String: Any]] {
            let text = (try? String(contentsOfFile: dir + "/events.json", encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
        var stepsAt: [Double] = []
        for step in steps {
            let wait = step.at - Date().timeIntervalSince(started)
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
            let control = try XCTUnwrap(parsed().first { $0["event"] as? String == "control" }?["socket"] as? String, "no control socket")
            stepsAt.append(Date().timeIntervalSince(started))
            try step.act(link, control)
        }
        run.waitUntilExit()
        try events.close()
        XCTAssertEqual(run.terminationStatus, 0)
        nginx.stop()
        let all = parsed()
        let changes = all.filter { $0["event"] as? String == "bitrate" }.map {
            (wall: $0["wall"] as? Double ?? 0, from: $0["from"] as? Int ?? 0, to: $0["to"] as? Int ?? 0, reason: $0["reason"] as? String ?? "")
        }
        XCTAssertFalse(all.contains { $0["event"] as? String == "disconnected" }, "no disconnect")
        return (all, changes, stepsAt, nginx)
    }

    func testTheBitrateStepsDownWhenTheLinkNarrowsAndClimbsBackWhenItClears() throws {
        let (_, changes, stepsAt, nginx) = try shapedRun(seconds: 20, steps: [
            (5, { link, _ in try link.set(megabits: 1.5) }),
            (11, { link, _ in try link.set(megabits: 5) }),
        ])
        let (narrowed, cleared) = (stepsAt[0], stepsAt[1])
        print("adaptive: narrowed at \(narrowed) s, cleared at \(cleared) s; " + changes.map { String(format: "%.1f s %dk", $0.wall, $0.to / 1000) }.joined(separator: ", "))
        for c in changes {
            XCTAssertGreaterThanOrEqual(c.to, Self.floor, "never below min")
            XCTAssertLessThanOrEqual(c.to, Self.ceiling, "never above the ceiling")
        }
        // Down within about a second of the cut (the run starts a moment after the test's clock),
        // to what 1.5 Mbit/s carries besides the audio.
        let down = try XCTUnwrap(changes.first { $0.to < $0.from && $0.wall >= narrowed - 1 }, "no step down after the cut")
        XCTAssertLessThan(down.wall, narrowed + 1.5, "the first step down came \(down.wall - narrowed) s after the cut")
        let lowest = changes.filter { $0.wall < cleared }.map(\.to).min() ?? Self.ceiling
        XCTAssertLessThanOrEqual(lowest, 1_400_000, "went down to what the link carries")
        // Back up to 90 % of the ceiling within 10 s of the link clearing (the run ends 9 s after).
        let back = changes.first { $0.wall > cleared && $0.to >= Self.ceiling * 9 / 10 }
        let climb = back.map { $0.wall - cleared }
        XCTAssertNotNil(climb, "never climbed back to 90 % of the ceiling: \(changes.map(\.to))")
        XCTAssertLessThan(climb ?? 99, 9)
        // What nginx received decodes cleanly.
        let session = try XCTUnwrap(nginx.sessions.last)
        XCTAssertEqual(try RecordingSafetyTests.decodeErrors(session), "")
    }

    /// The operator's `ctl set video.bitrate` is the new ceiling: applied at once, kept through a
    /// cut and the climb after it (the climb stops at it, not at the pipe's bitrate).
    func testAManualBitrateIsTheNewCeilingAndIsKept() throws {
        let manual = 2_000_000
        let (events, changes, stepsAt, nginx) = try shapedRun(seconds: 18, steps: [
            (3, { _, control in XCTAssertEqual(try CLI.run(["ctl", control, "set", "video.bitrate", "\(manual / 1000)k"]).status, 0) }),
            (6, { link, _ in try link.set(megabits: 1.0) }),
            (10, { link, _ in try link.set(megabits: 5) }),
        ])
        print("manual ceiling: set at \(stepsAt[0]) s, narrowed at \(stepsAt[1]) s, cleared at \(stepsAt[2]) s; " + changes.map { String(format: "%.1f s %dk", $0.wall, $0.to / 1000) }.joined(separator: ", "))
        let applied = try XCTUnwrap(events.first { $0["event"] as? String == "applied" && $0["option"] as? String == "bitrate" }, "the change was not applied")
        XCTAssertEqual(applied["value"] as? Int, manual)
        let appliedAt = applied["wall"] as? Double ?? 0
        for c in changes where c.wall > appliedAt {
            XCTAssertLessThanOrEqual(c.to, manual, "above the operator's ceiling at \(c.wall) s")
            XCTAssertGreaterThanOrEqual(c.to, Self.floor)
        }
        let down = changes.first { $0.wall > stepsAt[1] - 1 && $0.to < $0.from }
        XCTAssertNotNil(down, "no step down when the link narrowed to 1 Mbit/s")
        let back = changes.last { $0.wall > stepsAt[2] }
        XCTAssertGreaterThanOrEqual(back?.to ?? 0, manual * 9 / 10, "climbed back to the operator's ceiling: \(changes.map(\.to))")
        let session = try XCTUnwrap(nginx.sessions.last)
        XCTAssertEqual(try RecordingSafetyTests.decodeErrors(session), "")
    }
}
