import Foundation
import XCTest

/// deploy/avgraph@.service: systemd's own verifier accepts it, and the stop it asks for
/// (KillSignal, TimeoutStopSec) finalizes a recording in time.
final class ServiceUnitTests: XCTestCase {
    static let unitPath = CLI.packageRoot + "/deploy/avgraph@.service"

    static func run(_ args: [String]) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func setting(_ key: String, in unit: String) -> String? {
        unit.split(separator: "\n").first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// `systemd-analyze verify` needs no running systemd, but it does look for the ExecStart binary:
    /// the shipped unit points at /usr/local/bin/avgraph, so the verified copy points at this build.
    func testSystemdVerifiesTheUnit() throws {
        guard try Self.run(["sh", "-c", "command -v systemd-analyze"]).status == 0 else {
            XCTFail("systemd-analyze is missing: run scripts/setup (Debian package systemd)")
            return
        }
        let unit = try String(contentsOfFile: Self.unitPath, encoding: .utf8)
        XCTAssertTrue(unit.contains("ExecStart=/usr/local/bin/avgraph run "), "the unit runs the installed binary")
        let dir = CLI.scratch()
        let copy = dir + "/avgraph@.service"
        CLI.write(unit.replacingOccurrences(of: "/usr/local/bin/avgraph", with: CLI.binary), to: copy)
        let verified = try Self.run(["systemd-analyze", "verify", copy])
        XCTAssertEqual(verified.status, 0, verified.output)
        // verify exits 0 on unknown keys and bad values too, and says so: it must say nothing.
        XCTAssertEqual(verified.output.trimmingCharacters(in: .whitespacesAndNewlines), "", verified.output)

        // The verifier is not asleep: a misspelt key in the same unit is reported.
        CLI.write(unit.replacingOccurrences(of: "/usr/local/bin/avgraph", with: CLI.binary)
            .replacingOccurrences(of: "KillSignal=SIGINT", with: "KillSignl=SIGINT"), to: dir + "/broken@.service")
        let broken = try Self.run(["systemd-analyze", "verify", dir + "/broken@.service"])
        XCTAssertTrue(broken.output.contains("Unknown key 'KillSignl'"), broken.output)

        // The shipped file as it is: the only complaint is the binary not installed here.
        let shipped = try Self.run(["systemd-analyze", "verify", Self.unitPath])
        let complaints = shipped.output.split(separator: "\n").filter { !$0.contains("/usr/local/bin/avgraph is not executable") }
        XCTAssertEqual(complaints, [], shipped.output)
    }

    /// What systemd does at `systemctl stop` (the unit's KillSignal, then TimeoutStopSec before
    /// SIGKILL), done to a real realtime run: the MP4 is finalized, in time, and plays.
    func testTheUnitsStopFinalizesTheRecording() throws {
        let unit = try String(contentsOfFile: Self.unitPath, encoding: .utf8)
        XCTAssertEqual(Self.setting("KillSignal", in: unit), "SIGINT")
        let timeout = Double(Self.setting("TimeoutStopSec", in: unit) ?? "") ?? 0
        XCTAssertGreaterThanOrEqual(timeout, 60, "a stop must have time to flush and finalize")
        XCTAssertEqual(Self.setting("Restart", in: unit), "on-failure")

        let dir = CLI.scratch()
        CLI.write("""
        realtime: true
        control: \(dir)/ctl/svc.sock
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          app:    {type: tone, freq: 440, rate: 48000, channels: 2}
          video:  {type: h264, in: screen, bitrate: 800k, preset: ultrafast}
          audio:  {type: aac, in: app}
          out:    {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/svc.pipe")
        let run = try BackgroundRun(["run", "--events", "json", "--stats-interval", "10", dir + "/svc.pipe"], cwd: dir)
        XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "start" })
        usleep(2_500_000)
        let stopAt = Date()
        kill(run.process.processIdentifier, SIGINT)
        XCTAssertEqual(run.waitForExit(timeout: timeout), 0, run.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(stopAt), timeout)
        XCTAssertNotNil(run.events.first { $0["event"] as? String == "stopping" && $0["reason"] as? String == "SIGINT" })
        XCTAssertNotNil(run.events.first { $0["event"] as? String == "eos" })
        let probe = try CLI.probe(dir + "/out.mp4")
        XCTAssertEqual(CLI.stream(probe, "video")?["codec_name"] as? String, "h264")
        XCTAssertEqual(CLI.stream(probe, "audio")?["codec_name"] as? String, "aac")
        XCTAssertGreaterThan(try CLI.videoFrameTimes(dir + "/out.mp4").count, 45)
    }
}
