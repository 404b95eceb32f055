import Foundation
import XCTest

/// The `socket` source fed by `avgraph feed` (a phone's broadcast extension played from a file):
/// the MP4 the pipeline writes is decoded and checked.
final class SocketIngestTests: XCTestCase {
    /// A phone screen recording: portrait testsrc (bright marker top-left) and a 440 Hz tone, 10 s.
    static let source: String = {
        let dir = CLI.scratch("socketsource")
        CLI.write("""
        duration: 10s
        realtime: false
        nodes:
          screen: {type: testsrc, size: 720x1280, rate: 30}
          app:    {type: tone, freq: 440, rate: 48000, channels: 2, level: -6dB}
          video:  {type: h264, in: screen, preset: ultrafast, bitrate: 2M}
          audio:  {type: aac, in: app}
          out:    {type: file, in: [video, audio], path: src.mp4, overwrite: true}
        """, to: dir + "/src.pipe")
        _ = try? CLI.run(["run", dir + "/src.pipe"])
        return dir + "/src.mp4"
    }()

    static func pipe(socket: String, extra: String = "") -> String {
        """
        pipeline: ingest\(UUID().uuidString.prefix(6).lowercased())
        \(extra)
        nodes:
          phone:   {type: socket, path: \(socket), size: 720x1280, idle-warning: 1s}
          upright: {type: orient, in: phone.video}
          fit:     {type: resize, in: upright, size: 1280x720, mode: fit}
          smooth:  {type: fps, in: fit, rate: 30, hold: 4s}
          mix:     {type: mixer, in: [phone.app, phone.mic], rate: 48000}
          video:   {type: h264, in: smooth, bitrate: 2M, preset: ultrafast, queue: {size: 150}}
          audio:   {type: aac, in: mix}
          out:     {type: file, in: [video, audio], path: out.mp4, overwrite: true}
        """
    }

    func startRun(_ dir: String, extra: String = "") throws -> (BackgroundRun, String) {
        // Unix socket paths are limited to 107 bytes: keep it short, outside the scratch folder.
        let socket = "/tmp/avg-ingest-\(UUID().uuidString.prefix(8)).sock"
        CLI.write(Self.pipe(socket: socket, extra: extra), to: dir + "/ingest.pipe")
        let run = try BackgroundRun(["run", dir + "/ingest.pipe", "--events", "json"], cwd: dir)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, "socket source did not listen: \(run.stderr)")
        return (run, socket)
    }

    func feed(_ args: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: CLI.binary)
        p.arguments = ["feed"] + args
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Video frame times: every step one frame at 30 fps (no gap, no repeat of a timestamp).
    func assertGapFree(_ path: String, seconds: Double, file: StaticString = #filePath, line: UInt = #line) throws -> [Double] {
        let times = try CLI.videoFrameTimes(path)
        XCTAssertEqual(Double(times.count), seconds * 30, accuracy: seconds * 30 * 0.04, "frames", file: file, line: line)
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }
        XCTAssertLessThan(steps.max() ?? 1, 1.0 / 30 + 0.005, "a gap in the video timeline", file: file, line: line)
        XCTAssertGreaterThan(steps.min() ?? 0, 1.0 / 30 - 0.005, "frames closer than 1/30 s", file: file, line: line)
        return times
    }

    func testFeedWithTurnStallLateMicAndBigEndianAudioGivesAnUprightGapFreeRecording() throws {
        let dir = CLI.scratch()
        let (run, socket) = try startRun(dir)
        let producer = try feed([socket, Self.source, "--orientation", "0s:up,5s:left", "--stall", "3s:2s", "--mic-delay", "3s",
                                 "--big-endian"])
        producer.waitUntilExit()
        XCTAssertEqual(producer.terminationStatus, 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let out = dir + "/out.mp4"
        let probe = try CLI.probe(out)
        XCTAssertEqual(CLI.stream(probe, "video")?["width"] as? Int, 1280)
        XCTAssertEqual(CLI.stream(probe, "video")?["height"] as? Int, 720)
        _ = try assertGapFree(out, seconds: 10)

        // Upright in both halves: the portrait screen fitted into 1280x720, marker top-left only.
        let frames = try CLI.grayFrames(out, width: 1280, height: 720)
        let rect = (x: 438, y: 0, w: 404, h: 720)
        for index in [30, 75, 200, 270] where index < frames.count {
            CLI.assertMarkerTopLeft(frames[index], width: 1280, content: rect, "frame \(index)")
        }

        // App audio (sent big-endian) is the clean 440 Hz tone; the mic (880 Hz) only from ~3 s on.
        let samples = try CLI.samples(out, rate: 48000)
        XCTAssertGreaterThan(samples.count, 48000 * 9)
        func level(_ from: Double, _ to: Double, _ freq: Double) -> Double {
            let a = Int(from * 48000), b = min(samples.count, Int(to * 48000))
            guard a < b else { return 0 }
            return CLI.component(samples[a..<b], freq: freq, rate: 48000, startIndex: a).amplitude
        }
        XCTAssertGreaterThan(level(0.5, 2.5, 440), 0.1, "app tone missing or garbled (big-endian?)")
        XCTAssertLessThan(level(0.5, 2.5, 880), 0.01, "mic before 3 s")
        XCTAssertGreaterThan(level(4, 9, 880), 0.1, "mic missing after 3 s")
        XCTAssertGreaterThan(level(4, 9, 440), 0.1, "app tone missing after 3 s")
        // Where it starts: the first 50 ms window with the mic in it, ~3 s after the app audio's start.
        let onset = stride(from: 0.0, to: 9.0, by: 0.05).first { level($0, $0 + 0.05, 880) > 0.05 }
        XCTAssertEqual(onset ?? 0, 3.0, accuracy: 0.15, "mic starts at \(onset ?? -1) s")
    }

    func testProducerKilledAt5sAndRestartedAt7sGivesOneContinuousFile() throws {
        let dir = CLI.scratch()
        let (run, socket) = try startRun(dir)
        let first = try feed([socket, Self.source, "--no-end"])
        usleep(5_000_000)
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        usleep(2_000_000)
        let second = try feed([socket, Self.source, "--duration", "5s"])
        second.waitUntilExit()
        XCTAssertEqual(second.terminationStatus, 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let sessions = run.events.filter { $0["event"] as? String == "producer" && $0["state"] as? String == "connected" }
        XCTAssertEqual(sessions.count, 2, "two producer connections")
        let out = dir + "/out.mp4"
        XCTAssertEqual(CLI.streams(try CLI.probe(out)).count, 2)
        // 5 s, a 2 s gap held by fps, 5 s more: one timeline of about 12 s without a hole.
        let times = try assertGapFree(out, seconds: 12.2)
        XCTAssertEqual((times.last ?? 0) - (times.first ?? 0), 12.2, accuracy: 0.6)
    }

    /// One producer fed from `source` with `args` into a fresh run, to its end.
    func feedToEnd(_ args: [String]) throws -> (run: BackgroundRun, dir: String) {
        let dir = CLI.scratch()
        let (run, socket) = try startRun(dir)
        let producer = try feed([socket, Self.source] + args)
        producer.waitUntilExit()
        XCTAssertEqual(producer.terminationStatus, 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        return (run, dir)
    }

    func testFeedDisconnectAndReconnectContinuesTheTimeline() throws {
        let (run, dir) = try feedToEnd(["--disconnect", "3s:2s", "--duration", "7s", "--orientation", "0s:right"])
        let states = run.events.filter { $0["event"] as? String == "producer" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(Array(states.prefix(4)), ["connected", "disconnected", "connected", "ended"])
        _ = try assertGapFree(dir + "/out.mp4", seconds: 7)
    }

    /// The phone comes back with a still screen: its sound comes first, and seconds of slots are
    /// due at once. Their repeats go out paced by the encoder's queue; a burst of them would take
    /// the queue over the memory budget, where pictures are dropped: a hole in the recording.
    func testReconnectWithAStillScreenFillsTheGapWithoutDroppingPictures() throws {
        let (run, dir) = try feedToEnd(["--disconnect", "3s:2s", "--stall", "5s:1s", "--duration", "7s"])
        let stats = run.events.last { $0["event"] as? String == "stats" }
        XCTAssertEqual(stats?["dropped"] as? Int, 0, "pictures dropped: \(String(describing: stats))")
        _ = try assertGapFree(dir + "/out.mp4", seconds: 7)
    }

    func testRandomBytesDropTheConnectionAndAGoodProducerIsAcceptedAfter() throws {
        let dir = CLI.scratch()
        let (run, socket) = try startRun(dir)
        let fd = try Self.connect(socket)
        var bytes = [UInt8](repeating: 0, count: 1 << 20)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = send(fd, raw.baseAddress! + done, raw.count - done, Int32(MSG_NOSIGNAL))
                if n <= 0 { break }  // the source hung up on us: expected
                done += n
            }
        }
        close(fd)
        let warning = run.waitFor(timeout: 10) { ($0["event"] as? String == "warning") && (($0["message"] as? String)?.contains("malformed") ?? false) }
        XCTAssertNotNil(warning, "no warning for the malformed stream")
        XCTAssertTrue(run.process.isRunning, "the pipeline stopped")
        let good = try feed([socket, Self.source, "--duration", "3s"])
        good.waitUntilExit()
        XCTAssertEqual(good.terminationStatus, 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let connected = run.events.filter { $0["event"] as? String == "producer" && $0["state"] as? String == "connected" }
        XCTAssertEqual(connected.count, 2)
        let frames = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertGreaterThan(frames.count, 80, "the good producer's pictures were recorded")
    }

    func testNoProducerWarnsAndStopsOnDuration() throws {
        let dir = CLI.scratch()
        let (run, _) = try startRun(dir, extra: "duration: 3s")
        XCTAssertNotNil(run.waitFor(timeout: 5) { ($0["message"] as? String)?.contains("waiting for a producer") ?? false })
        // Nothing was recorded: the exit status says so (3), and so does stderr.
        XCTAssertEqual(run.waitForExit(timeout: 20), 3, run.stderr)
        XCTAssertTrue(run.stderr.contains("ended and wrote nothing: phone (socket) waited"), run.stderr)
    }

    static func connect(_ path: String) throws -> Int32 {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let b = Array(path.utf8)
            raw.copyBytes(from: b)
            raw[b.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        let r = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard r == 0 else { throw NSError(domain: "connect", code: Int(errno)) }
        return fd
    }
}
