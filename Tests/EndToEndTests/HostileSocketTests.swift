import Foundation
import XCTest

/// Sockets only for their owner (docs/CONTROL.md, docs/INGEST.md): another local user (uid 65534,
/// through `setpriv`) who binds a socket path first is refused by name, cannot send to a run's
/// sockets; nothing that is not a socket is ever removed; watchers that never read cannot slow a
/// live run.
final class HostileSocketTests: XCTestCase {
    static let nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    /// A short phone-like clip for `feed`, made by ffmpeg.
    static let media: String = {
        let dir = CLI.scratch("hostilemedia")
        let path = dir + "/clip.mp4"
        _ = try? Tool.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=360x640:rate=30", "-f", "lavfi",
                           "-i", "sine=frequency=440:sample_rate=48000", "-t", "4", "-pix_fmt", "yuv420p", "-c:v", "libx264",
                           "-preset", "ultrafast", "-c:a", "aac", path])
        return path
    }()

    func requireRoot() throws {
        try XCTSkipUnless(getuid() == 0, "needs root to act as a second user (setpriv --reuid 65534)")
    }

    /// A scratch folder another user can read (the .pipe file) and enter.
    func openScratch(_ name: String = #function) -> String {
        let dir = CLI.scratch(name)
        chmod(dir, 0o755)
        chmod((dir as NSString).deletingLastPathComponent, 0o755)
        return dir
    }

    func testAnotherUsersSocketIsRefusedByFeedCtlAndRunNamingTheOwner() throws {
        try requireRoot()
        let dir = openScratch()
        let tag = UUID().uuidString.prefix(8).lowercased()
        let squat = "/tmp/avg-squat-\(tag).sock"
        let squatControl = "/tmp/avg-squat-\(tag)/control.sock"
        defer { try? FileManager.default.removeItem(atPath: "/tmp/avg-squat-\(tag)"); unlink(squat) }
        // The other user gets there first: its own run listens at the path our producer would use.
        CLI.write("""
        pipeline: squat
        duration: 60s
        control: \(squatControl)
        nodes:
          phone: {type: socket, path: \(squat), size: 360x640, preallocate: false, idle-warning: 60s}
          sink:  {type: null, in: phone.video}
        """, to: dir + "/squat.pipe")
        chmod(dir + "/squat.pipe", 0o644)
        let other = try Tool.start(Self.nobody + [CLI.binary, "run", dir + "/squat.pipe", "--events", "json"])
        defer { other.stop() }
        XCTAssertTrue(other.waitForOutput("\"listening\""), "the other user's run did not listen: \(other.stderr)")
        var st = stat()
        XCTAssertEqual(lstat(squat, &st), 0)
        XCTAssertEqual(st.st_uid, 65534, "the socket belongs to the other user")

        let feed = try Tool.run([CLI.binary, "feed", squat, Self.media, "--duration", "1s"])
        XCTAssertEqual(feed.status, 1, "feed must refuse: \(feed.stderr)")
        XCTAssertTrue(feed.stderr.contains("nobody (uid 65534)"), "feed names the owner: \(feed.stderr)")
        XCTAssertFalse(other.output.contains("producer connected"), "nothing reached the other user's socket")

        let ctl = try Tool.run([CLI.binary, "ctl", squatControl, "stats"])
        XCTAssertEqual(ctl.status, 1, ctl.stdout)
        XCTAssertTrue(ctl.stderr.contains("nobody (uid 65534)"), "ctl names the owner: \(ctl.stderr)")
        XCTAssertFalse(ctl.stdout.contains("\"ok\""), "no request was answered")

        // Our own run with a socket source at that path: refused, and the other user's socket is left alone.
        CLI.write("""
        pipeline: mine\(tag)
        duration: 2s
        nodes:
          phone: {type: socket, path: \(squat), size: 360x640, preallocate: false}
          sink:  {type: null, in: phone.video}
        """, to: dir + "/mine.pipe")
        let mine = try Tool.run([CLI.binary, "run", dir + "/mine.pipe"])
        XCTAssertEqual(mine.status, 1)
        XCTAssertTrue(mine.stderr.contains("belongs to nobody (uid 65534)"), mine.stderr)
        XCTAssertEqual(lstat(squat, &st), 0)
        XCTAssertEqual(st.st_uid, 65534, "the other user's socket is still there")
    }

    func testAnotherUserCannotSendToTheIngestOrControlSocketAndTheRunGoesOn() throws {
        try requireRoot()
        // Short: a unix socket path has at most 107 bytes.
        let dir = "/tmp/avg-guard-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        CLI.write("""
        pipeline: guarded
        realtime: true
        duration: 5s
        control: \(dir)/ctl/guarded.sock
        nodes:
          phone:  {type: socket, path: \(dir)/in.sock, size: 360x640, preallocate: false, idle-warning: 60s}
          drain:  {type: null, in: phone.video}
          screen: {type: testsrc, size: 320x240, rate: 30}
          video:  {type: h264, in: screen, preset: ultrafast}
          out:    {type: file, in: [video], path: out.mp4}
        """, to: dir + "/guarded.pipe")
        let run = try BackgroundRun(["run", dir + "/guarded.pipe", "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        // Modes opened wide on purpose: only the peer-credential check stands in the way now.
        chmod(dir + "/ctl", 0o755)
        chmod(dir + "/in.sock", 0o666)
        chmod(dir + "/ctl/guarded.sock", 0o666)
        for target in ["in.sock", "ctl/guarded.sock"] {
            // ffmpeg's unix: protocol connects and writes, as the other user.
            _ = try Tool.run(Self.nobody + ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "sine=d=0.5", "-f", "s16le", "unix:\(dir)/\(target)"])
        }
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertTrue(warnings.contains { $0.contains("refused a connection from another user (uid 65534)") && $0.hasPrefix("control") },
                      "control refused: \(warnings)")
        XCTAssertTrue(run.events.contains { $0["event"] as? String == "warning" && $0["node"] as? String == "phone"
                                           && ($0["message"] as? String ?? "").contains("(uid 65534)") },
                      "ingest refused: \(warnings)")
        XCTAssertFalse(run.events.contains { $0["event"] as? String == "producer" }, "no producer session was opened")
        let probe = try CLI.probe(dir + "/out.mp4", ["-count_frames"])
        let frames = Int(CLI.stream(probe, "video")?["nb_read_frames"] as? String ?? "") ?? 0
        XCTAssertEqual(frames, 150, accuracy: 2, "the run is undisturbed")
    }

    func testControlPathNamingARegularFileIsRefusedAndTheFileKept() throws {
        let dir = CLI.scratch()
        try FileManager.default.createDirectory(atPath: dir + "/private", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        CLI.write("keep me\n", to: dir + "/private/notes.txt")
        CLI.write("""
        pipeline: clobber
        duration: 1s
        control: private/notes.txt
        nodes:
          screen: {type: testsrc, size: 64x64, rate: 30}
          sink:   {type: null, in: screen}
        """, to: dir + "/clobber.pipe")
        let r = try Tool.run([CLI.binary, "run", dir + "/clobber.pipe"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("exists and is not a socket"), r.stderr)
        XCTAssertEqual(try String(contentsOfFile: dir + "/private/notes.txt", encoding: .utf8), "keep me\n", "the file is intact")
    }

    func testSocketSourceDefaultsToThePrivateRuntimeFolderAndFeedFindsItByPipelineName() throws {
        let dir = CLI.scratch()
        let (runtime, environment) = try CLI.privateRuntime()
        var env = environment
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let name = "phone\(UUID().uuidString.prefix(6).lowercased())"
        CLI.write("""
        pipeline: \(name)
        nodes:
          phone:  {type: socket, size: 360x640, idle-warning: 1s}
          fit:    {type: resize, in: phone.video, size: 360x640, mode: fit}
          smooth: {type: fps, in: fit, rate: 30}
          video:  {type: h264, in: smooth, preset: ultrafast}
          out:    {type: file, in: [video], path: out.mp4, overwrite: true}
        """, to: dir + "/default.pipe")
        let run = try BackgroundRun(["run", dir + "/default.pipe", "--events", "json"], environment: env)
        let listening = try XCTUnwrap(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let path = "\(runtime)/avgraph/\(name).phone.ingest.sock"
        XCTAssertEqual(listening["path"] as? String, path)
        var st = stat()
        XCTAssertEqual(lstat(runtime + "/avgraph", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700, "folder mode")
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600, "socket mode")
        let feed = try Tool.run([CLI.binary, "feed", name, Self.media, "--duration", "3s"], environment: env)
        XCTAssertEqual(feed.status, 0, feed.stderr)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertGreaterThan(times.count, 60, "the fed pictures were recorded")
        XCTAssertNotEqual(lstat(path, &st), 0, "the socket is removed at the end")

        // The runtime folder swapped for a symlink (someone else's folder): refused, nothing bound.
        let elsewhere = dir + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let linked = dir + "/rt2"
        try FileManager.default.createDirectory(atPath: linked, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        symlink(elsewhere, linked + "/avgraph")
        env["XDG_RUNTIME_DIR"] = linked
        let refused = try Tool.run([CLI.binary, "run", dir + "/default.pipe"], environment: env)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("is not a folder (a symlink"), refused.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere), [], "nothing was bound through the symlink")
    }
}

/// A command run to its end, or in the background, with its output collected.
enum Tool {
    struct Result { var status: Int32; var stdout: String; var stderr: String }

    static func run(_ args: [String], environment: [String: String]? = nil, timeout: Double = 120) throws -> Result {
        let p = try start(args, environment: environment)
        let end = Date().addingTimeInterval(timeout)
        while p.process.isRunning && Date() < end { usleep(20_000) }
        if p.process.isRunning { p.stop(); XCTFail("\(args) timed out") }
        p.process.waitUntilExit()
        usleep(50_000)
        return Result(status: p.process.terminationStatus, stdout: p.output, stderr: p.stderr)
    }

    static func start(_ args: [String], environment: [String: String]? = nil) throws -> Running {
        try Running(args, environment: environment)
    }

    final class Running: @unchecked Sendable {
        let process = Process()
        private let out = CLI.DataBox(), err = CLI.DataBox()

        init(_ args: [String], environment: [String: String]?) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = args
            if let environment { process.environment = environment }
            let o = Pipe(), e = Pipe()
            process.standardOutput = o
            process.standardError = e
            o.fileHandleForReading.readabilityHandler = { [out] h in out.append(h.availableData) }
            e.fileHandleForReading.readabilityHandler = { [err] h in err.append(h.availableData) }
            try process.run()
        }

        var output: String { out.string }
        var stderr: String { err.string }

        func waitForOutput(_ text: String, timeout: Double = 20) -> Bool {
            let end = Date().addingTimeInterval(timeout)
            while Date() < end {
                if output.contains(text) { return true }
                if !process.isRunning { return output.contains(text) }
                usleep(20_000)
            }
            return false
        }

        func stop() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }
}
