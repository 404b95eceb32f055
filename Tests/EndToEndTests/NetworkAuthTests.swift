import AVGraphTesting
import Foundation
import XCTest

/// avgraph's RTMP listener faced with the open network: wrong keys and apps, a silent
/// connection, garbage, an oversize publisher, a publisher leaving. ffmpeg is the phone; raw
/// sockets are the rest. Every recording is decoded and measured.
final class NetworkAuthTests: XCTestCase {
    /// Source -> fit 1280x720 -> H.264 + AAC -> MP4, ending 3 s after the publisher left.
    static func pipe(_ source: String, idle: String = "3s") -> String {
        """
        pipeline: auth-test
        nodes:
          src: {type: rtmp, listen: true, idle: \(idle), \(source)}
          fit: {type: resize, in: src.video, size: 1280x720, mode: fit}
          v: {type: h264, in: fit}
          a: {type: aac, in: src.audio}
          out: {type: file, in: [v, a], path: out.mp4}
        """
    }

    /// A `seconds` long 30 fps phone clip.
    static func clip(_ dir: String, size: String = "720x1280", seconds: Int = 6, rate: Int = 30) throws -> String {
        let path = dir + "/phone-\(size)-\(seconds).mp4"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=\(size):r=\(rate):d=\(seconds)",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=\(seconds)", "-c:v", "libx264", "-preset", "ultrafast", "-g", "30",
                           "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", path])
        return path
    }

    private func start(_ dir: String, _ source: String, idle: String = "3s", environment: [String: String]? = nil) throws -> BackgroundRun {
        CLI.write(Self.pipe(source, idle: idle), to: dir + "/auth.pipe")
        let run = try BackgroundRun(["run", dir + "/auth.pipe", "--events", "json"], cwd: dir, environment: environment)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, "no listening event: \(run.stderr)")
        return run
    }

    /// ffmpeg publishing `clip` to `url` in realtime, while the test goes on.
    private func publishInBackground(_ clip: String, _ url: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-nostdin", "-re", "-i", clip, "-c", "copy", "-f", "flv", url]
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Each node's counters in the run's last stats, which come after every node has finished.
    private func lastNodeStats(_ run: BackgroundRun) -> [[String: Any]] {
        run.events.last { $0["event"] as? String == "stats" }?["nodes"] as? [[String: Any]] ?? []
    }

    private func warnings(_ run: BackgroundRun) -> [String] {
        run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
    }

    /// Seconds of video in `path` (first to last frame, plus one).
    private func videoSeconds(_ path: String) throws -> Double {
        let times = try CLI.videoFrameTimes(path)
        return (times.last ?? 0) - (times.first ?? 0) + 1.0 / 30
    }

    func testWrongKeyAndWrongAppAreRefusedWithTheirPeerNamedAndTheRightPublisherIsRecordedWhole() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir)
        let port = try LoopbackPort.free()
        let run = try start(dir, "url: \"rtmp://127.0.0.1:\(port)/live/phone\"", environment: ProcessInfo.processInfo.environment
            .filter { $0.key != "AVGRAPH_KEYS" })
        let base = "rtmp://127.0.0.1:\(port)"
        XCTAssertNotEqual(try NetworkIngestTests.publish(["-re", "-t", "1", "-i", clip, "-c", "copy", "-f", "flv", base + "/live/intruder"]), 0)
        XCTAssertNotEqual(try NetworkIngestTests.publish(["-re", "-t", "1", "-i", clip, "-c", "copy", "-f", "flv", base + "/other/phone"]), 0)
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", base + "/live/phone"]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let said = warnings(run)
        XCTAssertTrue(said.contains { $0.contains("127.0.0.1:") && $0.contains("refused: unknown key") }, "\(said)")
        XCTAssertTrue(said.contains { $0.contains("127.0.0.1:") && $0.contains("refused: wrong app") }, "\(said)")
        XCTAssertFalse(run.events.contains { "\($0)".contains("intruder") || "\($0)".contains("/phone") }, "no key in the events")
        XCTAssertFalse(run.stderr.contains("intruder"), run.stderr)
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected"], "only the right publisher became a session")
        XCTAssertGreaterThanOrEqual(try videoSeconds(dir + "/out.mp4"), 5.5)
    }

    /// Keys from a keys file (re-read when it changes) and from $AVGRAPH_KEYS, not the URL.
    func testKeysFileIsReadAgainWhenItChangesAndTheEnvironmentAddsKeys() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir, seconds: 2)
        let port = try LoopbackPort.free()
        CLI.write("# studio phones\nstudio/cam-7f3a\n", to: dir + "/keys")
        var env = ProcessInfo.processInfo.environment
        env["AVGRAPH_KEYS"] = "env-key-19c2"
        let run = try start(dir, "url: \"rtmp://127.0.0.1:\(port)/live\", keys-file: keys", idle: "6s", environment: env)
        let base = "rtmp://127.0.0.1:\(port)"
        func publish(_ path: String) throws -> Int32 {
            try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", base + path])
        }
        XCTAssertNotEqual(try publish("/live/cam-7f3a"), 0, "a key of another app")
        XCTAssertEqual(try publish("/studio/cam-7f3a"), 0)
        XCTAssertEqual(try publish("/live/env-key-19c2"), 0)
        XCTAssertNotEqual(try publish("/live/new-key-55"), 0, "not a key yet")
        CLI.write("studio/cam-7f3a\nnew-key-55\n", to: dir + "/keys")
        XCTAssertEqual(try publish("/live/new-key-55"), 0, "the file was read again")
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states.filter { $0 == "connected" }.count, 3)
        XCTAssertEqual(warnings(run).filter { $0.contains("refused: unknown key") }.count, 2, "\(warnings(run))")
        XCTAssertFalse("\(run.events)\(run.stderr)".contains("cam-7f3a") || "\(run.events)".contains("new-key-55"), "no key printed")
    }

    func testASilentConnectionHeld20sDoesNotLockThePhoneOut() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir)
        let port = try LoopbackPort.free()
        let run = try start(dir, "url: \"rtmp://127.0.0.1:\(port)/live/phone\"", idle: "30s")
        let silent = LoopbackPort.connect(port)
        XCTAssertGreaterThanOrEqual(silent, 0)
        let opened = Date()
        usleep(1_000_000)
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        // Another silent one, held the whole 20 s, then the phone again.
        let second = LoopbackPort.connect(port)
        usleep(UInt32(max(0, 20 - Date().timeIntervalSince(opened)) * 1e6))
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-t", "2", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        close(silent)
        close(second)
        run.process.interrupt()
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        XCTAssertEqual(warnings(run).filter { $0.contains("handshake timed out") && $0.contains("127.0.0.1:") }.count, 2, "\(warnings(run))")
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected", "connected", "disconnected"])
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        // The first publish's pictures: before the 12 s long gap.
        let gap = times.indices.dropLast().first { times[$0 + 1] - times[$0] > 5 } ?? times.count - 1
        XCTAssertGreaterThanOrEqual(times[gap] - times[0] + 1.0 / 30, 5.5, "the phone's 6 s")
    }

    /// Ten hostile connections (random bytes, half handshakes, a handshake then garbage chunks)
    /// while the phone publishes: the phone is recorded whole, not a picture dropped.
    func testGarbageConnectionsWhileThePhonePublishesCostNoPicture() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir)
        let port = try LoopbackPort.free()
        let run = try start(dir, "url: \"rtmp://127.0.0.1:\(port)/live/phone\", handshake-timeout: 2s")
        let phone = try publishInBackground(clip, "rtmp://127.0.0.1:\(port)/live/phone")
        usleep(1_500_000)
        var sockets: [Int32] = []
        for i in 0..<10 {
            let fd = LoopbackPort.connect(port)
            XCTAssertGreaterThanOrEqual(fd, 0)
            var bytes: [UInt8]
            switch i % 3 {
            case 0: bytes = (0..<4000).map { _ in UInt8.random(in: 0...255) }
            case 1: bytes = [3] + (0..<700).map { _ in UInt8.random(in: 0...255) }  // half a C1
            default:  // a whole handshake, then chunks of nonsense
                bytes = [3] + [UInt8](repeating: 0, count: 1536) + [UInt8](repeating: 0, count: 1536)
                bytes += [0x03, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x40, 0x14, 0, 0, 0, 0] + (0..<3000).map { _ in UInt8.random(in: 0...255) }
            }
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            sockets.append(fd)
            usleep(100_000)
        }
        phone.waitUntilExit()
        XCTAssertEqual(phone.terminationStatus, 0)
        for fd in sockets { close(fd) }
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let said = warnings(run)
        XCTAssertGreaterThanOrEqual(said.filter { $0.contains("127.0.0.1:") && ($0.contains("not RTMP") || $0.contains("timed out")) }.count, 10, "\(said)")
        // The run's last stats (after every node finished): the source dropped nothing (its picture
        // queue and packet backlog). An encoder's realtime edge may drop on a busy machine: counted,
        // not the listener's doing.
        let nodes = lastNodeStats(run)
        let drops = nodes.filter { ($0["dropped"] as? Int ?? 0) > 0 }.map { "\($0["node"] ?? ""): \($0["dropped_by_kind"] ?? "")" }
        XCTAssertNotNil(nodes.first { $0["node"] as? String == "src" }, "no stats of the source")
        XCTAssertEqual(nodes.first { $0["node"] as? String == "src" }?["dropped"] as? Int, 0, "dropped by node: \(drops)")
        let frames = try CLI.videoFrameTimes(dir + "/out.mp4").count
        XCTAssertGreaterThanOrEqual(frames, 175, "the phone's 180 pictures (dropped by node: \(drops))")
        XCTAssertGreaterThanOrEqual(try videoSeconds(dir + "/out.mp4"), 5.8)
    }

    /// A 7680x4320 publisher is refused from its sequence header: nothing decoded, the run's
    /// peak resident memory stays small; the phone after it is recorded.
    func testAn8KPublisherIsRefusedAndPeakMemoryStaysUnder200MB() throws {
        let dir = CLI.scratch()
        let big = try Self.clip(dir, size: "7680x4320", seconds: 2, rate: 10)
        let clip = try Self.clip(dir, seconds: 3)
        let port = try LoopbackPort.free()
        let run = try start(dir, "url: \"rtmp://127.0.0.1:\(port)/live/phone\"", idle: "5s")
        _ = try NetworkIngestTests.publish(["-re", "-i", big, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"])
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        let status = (try? String(contentsOfFile: "/proc/\(run.process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let hwm = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        print("peak resident memory (VmHWM) with a 7680x4320 publisher: \(hwm / 1024) MB")
        XCTAssertGreaterThan(hwm, 0)
        XCTAssertLessThan(hwm, 200 * 1024, "VmHWM \(hwm) kB")
        XCTAssertTrue(warnings(run).contains { $0.contains("127.0.0.1:") && $0.contains("7680x4320") && $0.contains("max-size") }, "\(warnings(run))")
        XCTAssertEqual(run.events.filter { $0["event"] as? String == "publisher" && $0["state"] as? String == "connected" }.count, 1)
        let v = try XCTUnwrap(CLI.stream(try CLI.probe(dir + "/out.mp4"), "video"))
        XCTAssertEqual(v["width"] as? Int, 1280)
        XCTAssertGreaterThanOrEqual(try videoSeconds(dir + "/out.mp4"), 2.7)
    }

    /// A publisher that sends faster than the pipeline takes (here: 6 s of 1080p at a high
    /// bitrate, all at once) is held to the source's `backlog` of compressed packets: past it the
    /// packets are dropped, counted as the source's, and said once. The same publisher with the
    /// default backlog loses nothing, so the drops are the bound's. (The sink's edge blocks: a
    /// realtime edge would drop a burst of 3 MB pictures itself, counted at the sink.)
    func testAPublisherFasterThanThePipelineIsHeldToTheBacklogAndTheDropsAreCounted() throws {
        let dir = CLI.scratch()
        let clip = dir + "/burst.mp4"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=1920x1080:r=30:d=6",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=6", "-c:v", "libx264", "-preset", "ultrafast", "-qp", "12",
                           "-g", "30", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", clip])
        let clipBytes = (try FileManager.default.attributesOfItem(atPath: clip)[.size] as? NSNumber)?.intValue ?? 0
        XCTAssertGreaterThan(clipBytes, 8_000_000, "the burst is many times the 1 MB backlog")
        func burst(backlog: String?) throws -> (pictures: Int, dropped: Int, said: [String]) {
            let port = try LoopbackPort.free()
            let option = backlog.map { ", backlog: \($0)" } ?? ""
            CLI.write("""
            pipeline: burst
            nodes:
              src: {type: rtmp, listen: true, idle: 2s, url: "rtmp://127.0.0.1:\(port)/live/phone"\(option)}
              out: {type: null, in: [src.video, src.audio], queue: {policy: block}}
            """, to: dir + "/burst.pipe")
            let run = try BackgroundRun(["run", dir + "/burst.pipe", "--events", "json"], cwd: dir)
            addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
            XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, "no listening event: \(run.stderr)")
            // No -re: the whole clip as fast as loopback carries it.
            XCTAssertEqual(try NetworkIngestTests.publish(["-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
            XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
            let counts = run.events.last { $0["event"] as? String == "null" }?["counts"] as? [Int] ?? []
            let src = lastNodeStats(run).first { $0["node"] as? String == "src" }
            let dropped = (src?["dropped_by_kind"] as? [String: Int])?["video"] ?? 0
            return (counts.first ?? 0, dropped, warnings(run))
        }
        let held = try burst(backlog: "1MB")
        let whole = try burst(backlog: nil)
        print("a 6 s 1080p burst of \(clipBytes / 1000) kB: backlog 1 MB kept \(held.pictures) pictures and dropped \(held.dropped); "
              + "the default backlog kept \(whole.pictures), dropped \(whole.dropped)")
        // The burst's end too: the listener acks only once it has read what the socket holds
        // (an ack that reaches FFmpeg after its close resets the connection and loses the tail:
        // 161-178 of 180 pictures arrived before).
        XCTAssertGreaterThanOrEqual(whole.pictures, 177, "the default backlog holds the whole burst")
        XCTAssertEqual(whole.dropped, 0)
        XCTAssertGreaterThan(held.dropped, 30, "the 1 MB backlog dropped pictures")
        XCTAssertGreaterThan(held.pictures, 0, "what fit still came through")
        XCTAssertLessThan(held.pictures + 30, whole.pictures)
        XCTAssertEqual(held.said.filter { $0.contains("1.0 MB of packets behind the publisher") }.count, 1, "said once: \(held.said)")
    }

    /// A second publisher with the right key while the first is live is refused; the first is
    /// recorded whole.
    func testASecondPublisherWhileOneIsLiveIsRefusedAndTheFirstIsRecordedWhole() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir)
        let port = try LoopbackPort.free()
        let run = try start(dir, "url: \"rtmp://127.0.0.1:\(port)/live/phone\"")
        let first = try publishInBackground(clip, "rtmp://127.0.0.1:\(port)/live/phone")
        usleep(1_500_000)
        XCTAssertNotEqual(try NetworkIngestTests.publish(["-re", "-t", "2", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        first.waitUntilExit()
        XCTAssertEqual(first.terminationStatus, 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        XCTAssertTrue(warnings(run).contains { $0.contains("127.0.0.1:") && $0.contains("another publisher is live") }, "\(warnings(run))")
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected"])
        XCTAssertGreaterThanOrEqual(try videoSeconds(dir + "/out.mp4"), 5.5)
    }

    /// Pictures faster than max-rate (by the stream's own timestamps): refused within a second.
    func testAPublisherOverMaxRateIsRefused() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir, seconds: 4)
        let port = try LoopbackPort.free()
        let run = try start(dir, "url: \"rtmp://127.0.0.1:\(port)/live/phone\", max-rate: 20")
        XCTAssertNotEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        _ = run.waitForExit(timeout: 30)
        XCTAssertTrue(warnings(run).contains { $0.contains("127.0.0.1:") && $0.contains("max-rate") }, "\(warnings(run))")
        let seconds = (try? videoSeconds(dir + "/out.mp4")) ?? 0
        XCTAssertLessThan(seconds, 1.5, "refused within its first second")
    }

    /// A publisher that stops is a normal end: no `error:` line, the run ends with 0.
    func testAPublisherLeavingPrintsNoError() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir, seconds: 2)
        let port = try LoopbackPort.free()
        CLI.write(Self.pipe("url: \"rtmp://127.0.0.1:\(port)/live/phone\"", idle: "2s"), to: dir + "/auth.pipe")
        let run = try BackgroundRun(["run", dir + "/auth.pipe", "-v"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        let end = Date().addingTimeInterval(20)
        while Date() < end && !LoopbackPort.accepts(port) { usleep(50_000) }
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        XCTAssertFalse(run.stderr.contains("error"), run.stderr)
        XCTAssertTrue(run.stderr.contains("127.0.0.1:"), "the peer is named: \(run.stderr)")
    }
}

/// The `srt` listener on libsrt: a caller's stream id checked against the keys, libsrt checking
/// the passphrase; refusals named by peer, the right caller recorded whole.
final class SrtAuthTests: XCTestCase {
    func testWrongStreamIdAndWrongPassphraseAreRefusedAndTheRightCallerIsRecordedWhole() throws {
        let dir = CLI.scratch()
        let clip = try NetworkAuthTests.clip(dir)
        let port = try LoopbackPort.free()
        CLI.write(NetworkAuthTests.pipe("url: \"srt://127.0.0.1:\(port)\", passphrase: phone-secret-1234, keys: [cam-42f]", idle: "3s")
            .replacingOccurrences(of: "type: rtmp, ", with: "type: srt, "), to: dir + "/srt.pipe")
        let run = try BackgroundRun(["run", dir + "/srt.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, "no listening event: \(run.stderr)")
        func call(_ query: String, _ extra: [String] = []) throws -> Int32 {
            try NetworkIngestTests.publish(["-re"] + extra + ["-i", clip, "-c", "copy", "-f", "mpegts", "srt://127.0.0.1:\(port)?mode=caller&" + query])
        }
        XCTAssertNotEqual(try call("passphrase=phone-secret-1234&streamid=intruder", ["-t", "1"]), 0)
        XCTAssertNotEqual(try call("passphrase=wrong-secret-999&streamid=cam-42f", ["-t", "1"]), 0)
        XCTAssertEqual(try call("passphrase=phone-secret-1234&streamid=cam-42f"), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let said = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertTrue(said.contains { $0.contains("127.0.0.1:") && $0.contains("refused: unknown key") }, "\(said)")
        XCTAssertTrue(said.contains { $0.contains("127.0.0.1:") && $0.contains("passphrase") }, "\(said)")
        XCTAssertFalse("\(run.events)\(run.stderr)".contains("intruder") || "\(run.events)\(run.stderr)".contains("cam-42f")
                       || "\(run.events)\(run.stderr)".contains("secret"), "no key or passphrase printed")
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected"], "only the right caller became a session")
        XCTAssertTrue((run.events.first { $0["event"] as? String == "publisher" }?["peer"] as? String ?? "").hasPrefix("127.0.0.1:"))
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertGreaterThanOrEqual((times.last ?? 0) - (times.first ?? 0) + 1.0 / 30, 5.5)
    }
}
