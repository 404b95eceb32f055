import AVGraph
import Foundation
import XCTest

/// A plain run talks on stderr, and its exit status tells the truth: warnings and errors as
/// readable lines prefixed with the node whatever stdout is, FFmpeg's lines tagged with their node,
/// `-q`/`-v`/`--log-level`, a final line with what each sink got, non-zero when nothing was recorded.
final class RunReportingTests: XCTestCase {
    /// A socket source no producer connects to (it warns after 300 ms), and a tone metered into a null sink.
    func waitingPipe(_ dir: String, duration: String = "1.5s") -> String {
        let path = dir + "/waiting.pipe"
        CLI.write("""
        pipeline: waiting-\(UUID().uuidString.prefix(6))
        realtime: true
        duration: \(duration)
        control: \(dir)/ctl/waiting.sock
        nodes:
          phone: {type: socket, path: \(dir)/in.sock, size: 320x240, idle-warning: 300ms}
          tone:  {type: tone, freq: 440}
          meter: {type: meter, in: tone, interval: 250ms}
          sink:  {type: null, in: [meter, phone.video]}
        """, to: path)
        return path
    }

    func testWarningsGoToStderrPrefixedWithTheNodeWhateverStdoutIs() throws {
        let dir = CLI.scratch()
        for args in [[String](), ["--events", "json"]] {
            let r = try CLI.run(["run", waitingPipe(dir)] + args, timeout: 60)
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stderr.contains("avgraph: warning: phone (socket): waiting for a producer on \(dir)/in.sock\n"), r.stderr)
            XCTAssertFalse(r.stderr.contains("info:"), "info lines only with -v: \(r.stderr)")
            XCTAssertFalse(r.stderr.contains("{"), "no JSON on stderr: \(r.stderr)")
            if args.isEmpty {
                XCTAssertEqual(r.stdout, "", "a plain run leaves stdout alone")
            } else {
                XCTAssertTrue(r.stdout.split(separator: "\n").allSatisfy { $0.hasPrefix("{") }, "stdout is only events")
                XCTAssertTrue(r.stdout.contains(#""event":"warning""#))
            }
        }
    }

    func testQuietVerboseAndPerNodeLevels() throws {
        let dir = CLI.scratch()
        let quiet = try CLI.run(["run", waitingPipe(dir), "-q"], timeout: 60)
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(quiet.stderr, "", "-q: nothing but errors")

        let verbose = try CLI.run(["run", waitingPipe(dir), "-v"], timeout: 60)
        XCTAssertTrue(verbose.stderr.contains("avgraph: info: phone (socket): listening on \(dir)/in.sock"), verbose.stderr)
        XCTAssertTrue(verbose.stderr.contains("avgraph: info: running waiting-"), verbose.stderr)
        XCTAssertFalse(verbose.stderr.contains("debug:"), verbose.stderr)

        // One node at debug: its level events show, the run's own debug (stats) does not.
        let meter = try CLI.run(["run", waitingPipe(dir), "--log-level", "warning,meter=debug"], timeout: 60)
        let levels = meter.stderr.split(separator: "\n").filter { $0.hasPrefix("avgraph: debug: meter (meter): level at ") }
        XCTAssertGreaterThanOrEqual(levels.count, 4, meter.stderr)
        XCTAssertFalse(meter.stderr.contains("avgraph: debug: media "), "stats are the run's, at warning: \(meter.stderr)")
        XCTAssertTrue(meter.stderr.contains("avgraph: warning: phone (socket)"), meter.stderr)

        // The run at error, one node at info.
        let phone = try CLI.run(["run", waitingPipe(dir), "--log-level", "error", "--log-level", "phone=info"], timeout: 60)
        XCTAssertTrue(phone.stderr.contains("avgraph: info: phone (socket): listening on"), phone.stderr)
        XCTAssertFalse(phone.stderr.contains("running waiting-"), phone.stderr)

        let bad = try CLI.run(["run", waitingPipe(dir), "--log-level", "nosuch=debug"])
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("no node named 'nosuch'"), bad.stderr)
        let badLevel = try CLI.run(["run", waitingPipe(dir), "--log-level", "loud"])
        XCTAssertEqual(badLevel.status, 2)
        XCTAssertTrue(badLevel.stderr.contains("'loud' is not a level"), badLevel.stderr)
    }

    /// libx264 reports its profile when it opens, at FFmpeg's info level: with the encoder's node
    /// at info, the line shows, tagged with that node; without, it does not.
    func testFFmpegLinesAreTaggedWithTheNodeThatCausedThem() throws {
        let dir = CLI.scratch()
        CLI.write("""
        pipeline: tagged
        duration: 1s
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          video:  {type: h264, in: screen}
          out:    {type: file, in: video, path: \(dir)/out.mp4}
        """, to: dir + "/tagged.pipe")
        let shown = try CLI.run(["run", dir + "/tagged.pipe", "--log-level", "video=info"])
        XCTAssertEqual(shown.status, 0, shown.stderr)
        let lines = shown.stderr.split(separator: "\n").filter { $0.contains("ffmpeg: [libx264]") }
        XCTAssertFalse(lines.isEmpty, shown.stderr)
        for l in lines { XCTAssertTrue(l.hasPrefix("avgraph: info: video (h264): ffmpeg: [libx264] "), String(l)) }
        let plain = try CLI.run(["run", dir + "/tagged.pipe"])
        XCTAssertFalse(plain.stderr.contains("libx264"), plain.stderr)
    }

    /// The phone pipeline, no producer, SIGINT after 5 s, stdout redirected: stderr says it waited
    /// for a producer and wrote nothing, and the exit status is not 0.
    func testARunThatRecordedNothingSaysSoAndExitsNonZero() throws {
        let dir = CLI.scratch()
        let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/phone-socket.pipe", "--set", "phone.path=\(dir)/phone.sock",
                             "--set", "out.path=\(dir)/out.mp4"], interruptAfter: 5, timeout: 60)
        XCTAssertEqual(r.status, 3, r.stderr)
        XCTAssertEqual(r.stdout, "")
        XCTAssertTrue(r.stderr.contains("stopped (SIGINT) and wrote nothing"), r.stderr)
        XCTAssertTrue(r.stderr.contains("phone (socket) waited 5 s for a producer on \(dir)/phone.sock and none came")
                      || r.stderr.contains("phone (socket) waited 4 s for a producer on \(dir)/phone.sock and none came"), r.stderr)
        XCTAssertTrue(r.stderr.contains("out (file) got no media"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out.mp4"))
    }

    /// `eos` and the final stderr line carry, per sink, bytes, media duration and frames, checked against the file.
    func testEosAndTheFinalLineCarryWhatEachSinkGot() throws {
        let dir = CLI.scratch()
        let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--duration", "4s", "--events", "json",
                             "--set", "out.path=\(dir)/live.mp4"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let eos = try Event.decode(line: String(try XCTUnwrap(r.stdout.split(separator: "\n").last)))
        guard case .eos(let end) = eos.kind else { return XCTFail("last event: \(eos)") }
        XCTAssertEqual(end.reason, "end")
        let sink = try XCTUnwrap(end.sinks.first { $0.node == "out" })
        let size = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: dir + "/live.mp4")[.size] as? Int)
        // The sink's bytes are the media it got; the file adds its container (a few KB).
        XCTAssertLessThanOrEqual(sink.bytes, size)
        XCTAssertGreaterThan(Double(sink.bytes), Double(size) * 0.95, "bytes \(sink.bytes), file \(size)")
        let probe = try CLI.probe(dir + "/live.mp4")
        XCTAssertEqual(sink.frames, Int(CLI.stream(probe, "video")?["nb_frames"] as? String ?? ""))
        let duration = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(sink.mediaDuration, duration, accuracy: 0.1)
        XCTAssertTrue(r.stderr.contains(String(format: "avgraph: live ended after %.2f s of media: out (file) %@, %.2f s, %d frames",
                                               end.mediaTime, StderrReporterFormat.bytes(sink.bytes), sink.mediaDuration, sink.frames)), r.stderr)
    }

    /// `ctl stop --reason TEXT` reaches `eos` and the final line.
    func testCtlStopReasonReachesEosAndStderr() throws {
        let dir = CLI.scratch()
        CLI.write("""
        pipeline: stopme
        realtime: true
        control: \(dir)/ctl/stopme.sock
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          video:  {type: h264, in: screen, tune: zerolatency}
          out:    {type: file, in: video, path: \(dir)/out.mp4}
        """, to: dir + "/stopme.pipe")
        let run = try BackgroundRun(["run", dir + "/stopme.pipe", "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        XCTAssertNotNil(run.waitFor(timeout: 30) { ($0["event"] as? String) == "stats" && ($0["media_time"] as? Double ?? 0) >= 1 })
        let stop = try CLI.run(["ctl", dir + "/ctl/stopme.sock", "stop", "--reason", "user ended the broadcast"])
        XCTAssertEqual(stop.status, 0, stop.stderr)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let eos = try XCTUnwrap(run.events.last)
        XCTAssertEqual(eos["event"] as? String, "eos")
        XCTAssertEqual(eos["reason"] as? String, "user ended the broadcast")
        let frames = (eos["sinks"] as? [[String: Any]])?.first?["frames"] as? Int ?? 0
        XCTAssertGreaterThanOrEqual(frames, 30)
        XCTAssertTrue(run.stderr.contains("avgraph: stopme stopped (user ended the broadcast) after "), run.stderr)
        XCTAssertTrue(run.stderr.contains("\(frames) frames"), run.stderr)
        XCTAssertEqual(try CLI.videoFrameTimes(dir + "/out.mp4").count, frames)
    }

    func testVersion() throws {
        let r = try CLI.run(["--version"])
        XCTAssertEqual(r.status, 0)
        XCTAssertTrue(r.stdout.hasPrefix("avgraph \(AVGraphVersion.string) "), r.stdout)
    }
}

/// The final line's byte figure, as the CLI writes it.
enum StderrReporterFormat {
    static func bytes(_ n: Int) -> String {
        n >= 10 << 20 ? "\(n >> 20) MB" : n >= 10 << 10 ? "\(n >> 10) KB" : "\(n) bytes"
    }
}
