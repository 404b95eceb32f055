import AVGraphTesting
import Foundation
import XCTest

/// scripts/ingest-server: a thin wrapper over `avgraph serve`, one avgraph run per published stream.
final class IngestServerTests: XCTestCase {
    /// The one recording of stream `name` in `out` (NAME-START.mp4).
    func recording(_ out: String, _ name: String) throws -> String {
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).filter { $0.hasPrefix(name + "-2") && $0.hasSuffix(".mp4") }
        XCTAssertEqual(files.count, 1, "\(name): one recording in \(out)")
        return out + "/" + (try XCTUnwrap(files.first, "\(name): no recording"))
    }

    /// Three phones publish at once; Ctrl-C comes while they still publish (after 10.5 s):
    /// three 1280x720 recordings of at least 8.5 s, finalized, and no nginx or avgraph left.
    func testThreePublishersGetThreeRecordingsAndCtrlCLeavesNoProcess() throws {
        let dir = CLI.scratch()
        let out = dir + "/recordings"
        let clip = dir + "/phone.mp4"
        try phoneClip(clip, size: "720x1280", seconds: 14)
        let port = try LoopbackPort.free()
        let server = try startServer(dir: dir, port: port, out: out)

        let names = ["alice", "bob", "carol"]
        let publishers = try names.map { try publish(clip, port: port, name: $0) }
        usleep(10_500_000)
        kill(server.processIdentifier, SIGINT)
        let stopBy = Date().addingTimeInterval(60)
        while server.isRunning && Date() < stopBy { usleep(50_000) }
        XCTAssertFalse(server.isRunning, "ingest-server stopped on SIGINT")
        for p in publishers { p.waitUntilExit() }
        let said = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""

        let left = (try? CLI.shell(["pgrep", "-f", out])) ?? ""
        XCTAssertEqual(left.trimmingCharacters(in: .whitespacesAndNewlines), "", "processes left: \(left)")
        for name in names {
            let file = try recording(out, name)
            let probe = try CLI.probe(file)
            let v = try XCTUnwrap(CLI.stream(probe, "video"), "\(name): no video in the recording; \(said)")
            XCTAssertEqual(v["width"] as? Int, 1280, name)
            XCTAssertEqual(v["height"] as? Int, 720, name)
            XCTAssertEqual(CLI.stream(probe, "audio")?["codec_name"] as? String, "aac", name)
            let times = try CLI.videoFrameTimes(file)
            let seconds = (times.last ?? 0) - (times.first ?? 0) + 1.0 / 30
            XCTAssertGreaterThanOrEqual(seconds, 8.5, "\(name): seconds recorded")
        }
    }

    /// `--keys FILE`: the listener checks the key before anything runs; a name not in the file
    /// is refused (the publisher fails, no run starts, nothing recorded, the name never
    /// printed), a listed one is recorded.
    func testKeysRefuseAnUnknownNameBeforeAnyAvgraphStarts() throws {
        let dir = CLI.scratch()
        let out = dir + "/recordings"
        let clip = dir + "/phone.mp4"
        try phoneClip(clip, size: "640x360", seconds: 4)
        CLI.write("# phones allowed\nalice-k3y\n", to: dir + "/keys")
        let port = try LoopbackPort.free()
        let server = try startServer(dir: dir, port: port, out: out, extra: ["--keys", dir + "/keys"])

        XCTAssertNotEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/mallory"]), 0,
                          "the listener refuses an unknown name")
        XCTAssertEqual((try? CLI.shell(["pgrep", "-f", "key=mallory"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "", "",
                       "no avgraph for it")
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/alice-k3y"]), 0)
        usleep(1_000_000)
        kill(server.processIdentifier, SIGINT)
        let stopBy = Date().addingTimeInterval(60)
        while server.isRunning && Date() < stopBy { usleep(50_000) }
        XCTAssertFalse(server.isRunning, "ingest-server stopped on SIGINT")
        let said = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(said.contains("127.0.0.1") && said.contains("refused: unknown key"), said)
        XCTAssertFalse(said.contains("mallory") || said.contains("alice-k3y"), "no name printed: \(said)")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []
        XCTAssertFalse(files.contains { $0.contains("mallory") }, "nothing recorded for it: \(files)")
        let times = try CLI.videoFrameTimes(try recording(out, "alice-k3y"))
        XCTAssertGreaterThanOrEqual((times.last ?? 0) - (times.first ?? 0) + 1.0 / 30, 3.8, "the listed name is recorded whole")
        let left = (try? CLI.shell(["pgrep", "-f", out])) ?? ""
        XCTAssertEqual(left.trimmingCharacters(in: .whitespacesAndNewlines), "", "processes left: \(left)")
    }

    /// scripts/ingest-server on loopback `port`, its output in DIR/server.log; waits until it listens.
    /// A phone's recording to publish: `size` pictures at 30 fps with a 440 Hz tone, `seconds` long.
    func phoneClip(_ path: String, size: String, seconds: Int) throws {
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=\(size):r=30:d=\(seconds)",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=\(seconds)", "-c:v", "libx264", "-preset", "veryfast", "-g", "30",
                           "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", path])
    }

    /// ffmpeg publishing `clip` in realtime as stream `name`.
    func publish(_ clip: String, port: Int, name: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-nostdin", "-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/\(name)"]
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    func startServer(dir: String, port: Int, out: String, extra: [String] = []) throws -> Process {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: CLI.packageRoot + "/scripts/ingest-server")
        server.arguments = ["--port", String(port), "--host", "127.0.0.1", "--out", out, "--avgraph", CLI.binary] + extra
        XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/server.log", contents: nil))
        let log = FileHandle(forWritingAtPath: dir + "/server.log")
        server.standardError = log
        server.standardOutput = log
        try server.run()
        addTeardownBlock { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        let end = Date().addingTimeInterval(20)
        while Date() < end && !LoopbackPort.accepts(port) { usleep(50_000) }
        XCTAssertTrue(LoopbackPort.accepts(port), "serve listens")
        return server
    }
}
