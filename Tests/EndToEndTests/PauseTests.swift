import Foundation
import XCTest

/// Pausing a run cuts the paused span of media out of the recording whatever feeds it: here a
/// producer over the socket (`avgraph feed`). The app source's counterpart is in
/// AVGraphTests/AppSourceTests (it needs Swift code in the process).
final class PauseTests: XCTestCase {
    func testPauseDuringASocketFedRunCutsThePausedSpan() throws {
        let dir = CLI.scratch()
        let socket = "/tmp/avg-pause-\(UUID().uuidString.prefix(8)).sock"
        CLI.write(SocketIngestTests.pipe(socket: socket, extra: "control: \(dir)/ctl/p.sock"), to: dir + "/p.pipe")
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json"], cwd: dir)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let producer = Process()
        producer.executableURL = URL(fileURLWithPath: CLI.binary)
        producer.arguments = ["feed", socket, SocketIngestTests.source]
        producer.standardError = FileHandle.nullDevice
        try producer.run()
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "producer" && $0["state"] as? String == "connected" })
        usleep(3_000_000)
        XCTAssertEqual(try CLI.run(["ctl", dir + "/ctl/p.sock", "pause"]).status, 0)
        usleep(2_000_000)
        XCTAssertEqual(try CLI.run(["ctl", dir + "/ctl/p.sock", "resume"]).status, 0)
        producer.waitUntilExit()
        XCTAssertEqual(producer.terminationStatus, 0)
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        let resumed = try XCTUnwrap(run.events.first { $0["event"] as? String == "resumed" })
        let paused = try XCTUnwrap(resumed["paused_for"] as? Double)
        XCTAssertEqual(paused, 2, accuracy: 0.5)
        let probe = try CLI.probe(dir + "/out.mp4")
        let v = try XCTUnwrap(CLI.stream(probe, "video")), a = try XCTUnwrap(CLI.stream(probe, "audio"))
        let vd = Double(v["duration"] as? String ?? "") ?? 0, ad = Double(a["duration"] as? String ?? "") ?? 0
        // The producer fed 10 s of media.
        XCTAssertEqual(vd, 10 - paused, accuracy: 0.2, "video span: fed 10 s, paused \(paused) s")
        XCTAssertEqual(ad, 10 - paused, accuracy: 0.2, "audio span: fed 10 s, paused \(paused) s")
        XCTAssertEqual(vd, ad, accuracy: 0.15, "A/V spans")
        print("pause during a socket-fed run: paused \(paused) s, video \(vd) s, audio \(ad) s")
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertLessThan(zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 1, 0.1, "no hole where the pause was")
    }
}
