import AVGraphTesting
import Foundation
import XCTest

/// A recording survives every way a run can end: kill -9, a full disk, a reader that goes
/// away, repeated signals. The faults are real (SIGKILL, a small tmpfs, a closed pipe) and the
/// files are judged by ffmpeg decoding them.
final class RecordingSafetyTests: XCTestCase {
    /// `pipelines/live.pipe` as it is, but with its own pipeline name (so runs side by side get
    /// their own control sockets) and its asset found from anywhere.
    static func livePipe(in dir: String, name: String) throws -> String {
        var text = try String(contentsOfFile: CLI.packageRoot + "/pipelines/live.pipe", encoding: .utf8)
        text = text.replacingOccurrences(of: "pipeline: live\n", with: "pipeline: \(name)\n")
            .replacingOccurrences(of: "../assets/", with: CLI.packageRoot + "/assets/")
        XCTAssertTrue(text.contains("pipeline: \(name)\n"))
        let path = dir + "/\(name).pipe"
        CLI.write(text, to: path)
        return path
    }

    /// What `ffmpeg -v error` says decoding the whole file (empty: it decodes cleanly).
    static func decodeErrors(_ path: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-f", "null", "-"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let data = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self) + (p.terminationStatus == 0 ? "" : "exit \(p.terminationStatus)")
    }

    /// Seconds of decoded video (frames at 30 fps) and audio (samples) in the file.
    static func decodedSeconds(_ path: String) throws -> (video: Double, audio: Double) {
        let frames = try CLI.videoFrameTimes(path)
        let video = frames.isEmpty ? 0 : (frames.max()! + 1.0 / 30)
        let audio = Double(try CLI.samples(path).count) / 44100
        return (video, audio)
    }

    /// Seconds of video and audio packets in the file (each stream's last pts plus duration):
    /// what it holds, read without decoding (decodeErrors decodes).
    static func packetSeconds(_ path: String) throws -> (video: Double, audio: Double) {
        let out = try CLI.shell(["ffprobe", "-v", "error", "-show_entries", "packet=codec_type,pts_time,duration_time", "-of", "csv=p=0", path])
        var end: [String: Double] = [:]
        for line in out.split(separator: "\n") {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard f.count >= 3, let pts = Double(f[1]) else { continue }
            end[f[0]] = max(end[f[0]] ?? 0, pts + (Double(f[2]) ?? 0))
        }
        return (end["video"] ?? 0, end["audio"] ?? 0)
    }

    /// The encoders' media time in a stats event: what had been handed to the sink.
    static func encodedTime(_ stats: [String: Any]) -> Double? {
        let nodes = stats["nodes"] as? [[String: Any]] ?? []
        let times = nodes.filter { ["video", "audio"].contains($0["node"] as? String) }
            .compactMap { ($0["time"] as? [Double])?.first }
        return times.count == 2 ? times.min() : nil
    }

    /// Realtime runs of live.pipe with default options, each killed (SIGKILL) at a random moment:
    /// each file decodes without an error and holds all the run had encoded but the last 2 s at
    /// most. Five runs between 2 and 10 s; twenty between 2 and 20 s with AVGRAPH_LONG_TESTS=1.
    /// Five runs go side by side to keep the wall time short.
    func testKillNineAtRandomMomentsLeavesPlayableFiles() throws {
        var generator = SystemRandomNumberGenerator()
        let moments = LongTests.enabled ? (0..<20).map { _ in Double.random(in: 2...20, using: &generator) }
                                        : (0..<5).map { _ in Double.random(in: 2...10, using: &generator) }
        // Longest first, each to the lane with the least to do: the lanes end together.
        let lanes = 5
        var plan = Array(repeating: [Int](), count: lanes), load = Array(repeating: 0.0, count: lanes)
        for i in moments.indices.sorted(by: { moments[$0] > moments[$1] }) {
            let lane = load.indices.min { load[$0] < load[$1] }!
            plan[lane].append(i)
            load[lane] += moments[i]
        }
        let dir = CLI.scratch()
        final class Outcome: @unchecked Sendable {
            let lock = NSLock()
            var lines: [String] = []
            var failures: [String] = []
            func add(_ line: String, failure: Bool) { lock.lock(); lines.append(line); if failure { failures.append(line) }; lock.unlock() }
        }
        let outcome = Outcome()
        @Sendable func runLane(_ indices: [Int]) {
            for i in indices {
                let moment = moments[i]
                do {
                    let name = "kill\(i)"
                    let pipe = try Self.livePipe(in: dir, name: name)
                    let out = dir + "/\(name).mp4"
                    let run = try BackgroundRun(["run", pipe, "--realtime", "--events", "json", "--set", "out.path=\(out)"])
                    // Kill right after the first stats at or past the moment: the run just said how far it got.
                    let stats = run.waitFor(timeout: moment + 30) { e in
                        e["event"] as? String == "stats" && (e["wall"] as? Double ?? 0) >= moment
                    }
                    kill(run.process.processIdentifier, SIGKILL)
                    let status = run.waitForExit()
                    guard let stats, let encoded = Self.encodedTime(stats) else {
                        outcome.add("kill at \(moment): no stats before the kill; stderr: \(run.stderr)", failure: true)
                        continue
                    }
                    let errors = try Self.decodeErrors(out)
                    let held = try Self.packetSeconds(out)
                    let lost = encoded - min(held.video, held.audio)
                    let line = String(format: "kill at %.2f s (status %d): encoded %.2f s, file holds video %.2f s audio %.2f s, lost %.2f s",
                                      stats["wall"] as? Double ?? 0, status, encoded, held.video, held.audio, lost)
                    let bad = status != 9 && status != 137 || !errors.isEmpty || lost > 2.0 || encoded < 1
                    outcome.add(line + (errors.isEmpty ? "" : " DECODE ERRORS: \(errors.prefix(300))"), failure: bad)
                } catch {
                    outcome.add("kill at \(moment): \(error)", failure: true)
                }
            }
        }
        // Threads of our own: concurrentPerform would run only as many lanes as there are cores.
        let group = DispatchGroup()
        for lane in plan {
            group.enter()
            Thread { runLane(lane); group.leave() }.start()
        }
        group.wait()
        print(outcome.lines.sorted().joined(separator: "\n"))
        XCTAssertEqual(outcome.lines.count, moments.count)
        XCTAssertTrue(outcome.failures.isEmpty, outcome.failures.joined(separator: "\n"))
    }

    /// kill -9 while the clean end rewrites the journal as a regular MP4: the journal at the
    /// path is whole (it decodes and holds the whole run); the next run there clears the
    /// half-made copy.
    func testKillNineWhileFinalizingKeepsTheWholeJournal() throws {
        let dir = CLI.scratch()
        let out = dir + "/live.mp4", temporary = dir + "/.live.mp4.finalizing"
        var caught = false
        for _ in 0..<3 where !caught {
            let run = try BackgroundRun(["run", CLI.packageRoot + "/pipelines/live.pipe", "--duration", "30s", "--set", "out.path=\(out)",
                                         "--set", "out.overwrite=true"])
            // The copy is made in tens of milliseconds: watch for it closely.
            while run.process.isRunning {
                if FileManager.default.fileExists(atPath: temporary) {
                    kill(run.process.processIdentifier, SIGKILL)
                    caught = true
                    break
                }
                usleep(500)
            }
            _ = run.waitForExit()
        }
        guard caught else { throw XCTSkip("the rewrite was over before it could be seen, three times") }
        XCTAssertEqual(try Self.decodeErrors(out), "")
        let held = try Self.packetSeconds(out)
        XCTAssertEqual(min(held.video, held.audio), 30, accuracy: 0.05)
        XCTAssertTrue(CLI.topLevelBoxes(out).contains("moof"), "the journal, fragmented")
        let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--duration", "1s", "--set", "out.path=\(out)", "--set", "out.overwrite=true"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["live.mp4"])
    }

    /// A clean end gives a regular MP4: the index (moov) before the media, no fragments, no
    /// temporary left beside it.
    func testCleanEndIsFaststart() throws {
        let dir = CLI.scratch()
        let out = dir + "/live.mp4"
        let r = try CLI.run(["run", "pipelines/live.pipe", "--duration", "5s", "--set", "out.path=\(out)"], cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stderr)
        let boxes = CLI.topLevelBoxes(out)
        let moov = try XCTUnwrap(boxes.firstIndex(of: "moov"), "\(boxes)")
        let mdat = try XCTUnwrap(boxes.firstIndex(of: "mdat"), "\(boxes)")
        XCTAssertLessThan(moov, mdat, "\(boxes)")
        XCTAssertFalse(boxes.contains("moof"), "\(boxes)")
        XCTAssertEqual(try Self.decodeErrors(out), "")
        let held = try Self.decodedSeconds(out)
        XCTAssertEqual(held.video, 5, accuracy: 0.05)
        XCTAssertEqual(held.audio, 5, accuracy: 0.05)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["live.mp4"])

        // fragmented: true leaves it as recorded.
        let frag = dir + "/frag.mp4"
        let f = try CLI.run(["run", "pipelines/live.pipe", "--duration", "3s", "--set", "out.path=\(frag)", "--set", "out.fragmented=true"],
                            cwd: CLI.packageRoot)
        XCTAssertEqual(f.status, 0, f.stderr)
        let fragBoxes = CLI.topLevelBoxes(frag)
        XCTAssertGreaterThanOrEqual(fragBoxes.filter { $0 == "moof" }.count, 3, "fragments of at most a second: \(fragBoxes)")
        XCTAssertEqual(try Self.decodeErrors(frag), "")
    }

    /// `| head -1`: the reader goes after the first event; the run must not die of SIGPIPE and
    /// the recording goes on to its end.
    func testClosedStdoutStopsTheEventsNotTheRecording() throws {
        let dir = CLI.scratch()
        let out = dir + "/live.mp4"
        let script = "\"$0\" run pipelines/live.pipe --realtime --duration 6s --events json --set out.path=\(out) | head -1; echo \"status=${PIPESTATUS[0]}\""
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", script, CLI.binary]
        p.currentDirectoryURL = URL(fileURLWithPath: CLI.packageRoot)
        let pipe = Pipe()
        p.standardOutput = pipe
        try p.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let lines = output.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, output)
        XCTAssertTrue(lines.first?.contains("\"event\":\"start\"") == true, output)
        XCTAssertEqual(lines.last, "status=0", output)
        XCTAssertEqual(try Self.decodeErrors(out), "")
        let held = try Self.decodedSeconds(out)
        XCTAssertGreaterThanOrEqual(min(held.video, held.audio), 5.0)

        // Standard output and error closed from the start: the recording must not take their
        // descriptors (it would receive the events).
        let closed = dir + "/closed.mp4"
        let q = Process()
        q.executableURL = URL(fileURLWithPath: "/bin/bash")
        q.arguments = ["-c", "\"$0\" run pipelines/live.pipe --duration 3s --events json --set out.path=\(closed) >&- 2>&-", CLI.binary]
        q.currentDirectoryURL = URL(fileURLWithPath: CLI.packageRoot)
        try q.run()
        q.waitUntilExit()
        XCTAssertEqual(q.terminationStatus, 0)
        XCTAssertEqual(try Self.decodeErrors(closed), "")
        XCTAssertEqual(try Self.decodedSeconds(closed).video, 3, accuracy: 0.05)
    }

    /// A second signal while stopping only answers: the file is finalized (faststart). A third
    /// quits at once, and the file still plays. The process is stopped (SIGSTOP) while the
    /// signals are sent, so they arrive together, whatever the machine's load: distinct signals
    /// (SIGHUP, SIGINT, SIGTERM all stop a run) so the kernel does not merge them.
    func testRepeatedSignalsNeverLeaveABrokenFile() throws {
        let dir = CLI.scratch()
        for signals in [[SIGINT, SIGTERM], [SIGHUP, SIGINT, SIGTERM]] {
            let out = dir + "/live\(signals.count).mp4"
            let run = try BackgroundRun(["run", try Self.livePipe(in: dir, name: "signals\(signals.count)"), "--realtime", "--events", "json",
                                         "--set", "out.path=\(out)"])
            XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "stats" && ($0["wall"] as? Double ?? 0) >= 3 })
            let pid = run.process.processIdentifier
            kill(pid, SIGSTOP)
            for sig in signals { kill(pid, sig) }
            kill(pid, SIGCONT)
            let status = run.waitForExit()
            XCTAssertEqual(try Self.decodeErrors(out), "", "\(signals.count) signals")
            let held = try Self.decodedSeconds(out)
            XCTAssertGreaterThanOrEqual(min(held.video, held.audio), 1.5, "\(signals.count) signals")
            let boxes = CLI.topLevelBoxes(out)
            if signals.count == 2 {
                XCTAssertEqual(status, 0, run.stderr)
                XCTAssertLessThan(try XCTUnwrap(boxes.firstIndex(of: "moov")), try XCTUnwrap(boxes.firstIndex(of: "mdat")), "\(boxes)")
                XCTAssertTrue(run.stderr.contains("still finalizing"), run.stderr)
            } else {
                XCTAssertTrue([128 + SIGHUP, 128 + SIGINT, 128 + SIGTERM].contains(status), "status \(status): \(run.stderr)")
                XCTAssertTrue(boxes.contains("moof"), "quit before finalizing: the journal stays: \(boxes)")
            }
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".finalizing") }
            XCTAssertEqual(leftovers, [])
        }
    }

    // MARK: a full disk

    /// A tmpfs of `megabytes` mounted for the test (needs root), unmounted after it.
    func smallDisk(megabytes: Int) throws -> String {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a tmpfs") }
        let dir = CLI.scratch(name) + "-disk"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", dir]
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw XCTSkip("cannot mount a tmpfs here") }
        addTeardownBlock {
            let u = Process()
            u.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            u.arguments = ["umount", dir]
            try? u.run()
            u.waitUntilExit()
        }
        return dir
    }

    /// The disk fills mid-recording: exit 1, an error naming the sink and saying the disk is
    /// full, the file cut back to a whole fragment (decodes cleanly), and the other sink of the
    /// run finalized as at a clean end.
    func testDiskFullCutsBackAndFinalizesTheOtherSink() throws {
        let disk = try smallDisk(megabytes: 3)
        let dir = CLI.scratch()
        var text = try String(contentsOfFile: Self.livePipe(in: dir, name: "diskfull"), encoding: .utf8)
        text += "  backup:  {type: file, in: [video, audio], path: \(dir)/backup.mp4}\n"
        CLI.write(text, to: dir + "/diskfull.pipe")
        let r = try CLI.run(["run", dir + "/diskfull.pipe", "--duration", "30s", "--set", "out.path=\(disk)/live.mp4"])
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("out (file): ") && r.stderr.contains("the disk is full") && r.stderr.contains("\(disk)/live.mp4"), r.stderr)
        XCTAssertEqual(try Self.decodeErrors(disk + "/live.mp4"), "")
        let held = try Self.decodedSeconds(disk + "/live.mp4")
        XCTAssertGreaterThan(min(held.video, held.audio), 5, "2.5 Mbit/s in 3 MB")
        let backup = try Self.decodedSeconds(dir + "/backup.mp4")
        XCTAssertGreaterThanOrEqual(min(backup.video, backup.audio), min(held.video, held.audio))
        let boxes = CLI.topLevelBoxes(dir + "/backup.mp4")
        XCTAssertLessThan(try XCTUnwrap(boxes.firstIndex(of: "moov")), try XCTUnwrap(boxes.firstIndex(of: "mdat")), "\(boxes)")
        XCTAssertEqual(try Self.decodeErrors(dir + "/backup.mp4"), "")
    }

    /// The recording fits but its faststart copy does not: exit 1 saying so, and the recording
    /// stays whole (fragmented) with no temporary left.
    func testDiskFullWhileFinalizingKeepsTheFragmentedRecording() throws {
        let disk = try smallDisk(megabytes: 3)
        let r = try CLI.run(["run", "pipelines/live.pipe", "--duration", "15s", "--set", "out.path=\(disk)/live.mp4"], cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("stays fragmented") && r.stderr.contains("the disk is full"), r.stderr)
        XCTAssertEqual(try Self.decodeErrors(disk + "/live.mp4"), "")
        let held = try Self.decodedSeconds(disk + "/live.mp4")
        XCTAssertEqual(min(held.video, held.audio), 15, accuracy: 0.05)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: disk), ["live.mp4"])
    }
}
