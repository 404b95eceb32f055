import AVGraphTesting
import Foundation
import XCTest

/// A recording ends where its media ends: a producer that leaves and does not come back before
/// the run ends (idle, Ctrl-C) leaves no frozen picture and no silence behind its last media;
/// audio and video end within one frame of each other.
final class RecordingEndTests: XCTestCase {
    /// Each stream's duration as ffprobe reads it (video, audio).
    static func durations(_ path: String) throws -> (video: Double, audio: Double) {
        func duration(_ stream: String) throws -> Double {
            let s = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "\(stream):0", "-show_entries", "stream=duration", "-of", "csv=p=0", path])
            return Double(s.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        return (try duration("v"), try duration("a"))
    }

    func assertEnds(_ path: String, at seconds: Double, _ log: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let d = try Self.durations(path)
        XCTAssertEqual(d.video, seconds, accuracy: 0.2, "video duration (\(log))", file: file, line: line)
        XCTAssertEqual(d.audio, seconds, accuracy: 0.2, "audio duration (\(log))", file: file, line: line)
        XCTAssertEqual(d.video, d.audio, accuracy: 1.0 / 30 + 0.001, "audio and video end together", file: file, line: line)
    }

    /// 6 s published to pipelines/ingest.pipe listening on loopback; the run ends `idle` after.
    func publishSixSeconds(idle: String?) throws -> (path: String, log: String) {
        let dir = CLI.scratch(idle == nil ? "ingest-own-idle" : "ingest-idle-\(idle!)")
        let clip = dir + "/six.mp4"
        try FlashBeep.makeClip(clip, seconds: 6)
        let port = try LoopbackPort.free()
        let out = dir + "/ingest.mp4"
        var args = ["run", CLI.packageRoot + "/pipelines/ingest.pipe", "--events", "json", "--set", "src.listen=true",
                    "--set", "src.url=rtmp://127.0.0.1:\(port)/live/phone", "--set", "out.path=\(out)"]
        if let idle { args += ["--set", "src.idle=\(idle)"] }
        let run = try BackgroundRun(args, cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        XCTAssertTrue(run.events.contains { $0["event"] as? String == "idle" }, "the run ended by idle")
        return (out, run.stderr)
    }

    func testRtmpPublishOf6sThenIdle5sRecords6sOfVideoAndAudio() throws {
        let (path, log) = try publishSixSeconds(idle: "5s")
        try assertEnds(path, at: 6, log)
        // The media itself, not only the container's numbers: the last flash is 5.5 s in, on its beep.
        let m = try FlashBeep.measure(path)
        FlashBeep.assertInSync(m, atLeast: 6)
    }

    /// pipelines/ingest.pipe with its own `idle: 30s`: the same 6 s, not 36.
    func testIngestPipeOnItsOwnRecordsTheSixSecondsNotTheIdleWait() throws {
        let (path, log) = try publishSixSeconds(idle: nil)
        try assertEnds(path, at: 6, log)
    }

    /// A socket producer that sends 6 s and disconnects without its end message; the run is
    /// stopped with Ctrl-C 3 s later.
    func testSocketProducerThatLeavesThenCtrlCRecordsItsSixSeconds() throws {
        let dir = CLI.scratch()
        let clip = dir + "/six.mp4"
        try FlashBeep.makeClip(clip, seconds: 8)
        let socket = "/tmp/avg-end-\(UUID().uuidString.prefix(8)).sock"
        CLI.write(SyncTests.phonePipe(socket: socket, size: "720x1280"), to: dir + "/p.pipe")
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        let feed = Process()
        feed.executableURL = URL(fileURLWithPath: CLI.binary)
        feed.arguments = ["feed", socket, clip, "--duration", "6s", "--no-end"]
        feed.standardError = FileHandle.nullDevice
        try feed.run()
        feed.waitUntilExit()
        XCTAssertEqual(feed.terminationStatus, 0)
        usleep(3_000_000)
        run.process.interrupt()
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        try assertEnds(dir + "/out.mp4", at: 6, run.stderr)
    }
}
