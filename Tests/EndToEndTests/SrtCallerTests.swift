import AVGraphTesting
import Foundation
import XCTest

/// The `srt` sink's own libsrt caller socket against srt-live-transmit (srt-tools), an SRT
/// receiver nobody here wrote, writing what arrives to a .ts: the whole stream with and without
/// encryption, a wrong passphrase refused with libsrt's reason, and a stalled receiver that
/// does not hold up the end of the run.
final class SrtCallerTests: XCTestCase {
    /// srt-live-transmit listening on `port` (extra URI options in `query`), the bytes it receives
    /// written to `path`; it exits once its caller hangs up (`-a:no`).
    static func receiver(port: Int, query: String = "", to path: String) throws -> Process {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["srt-live-transmit", "-q", "-a:no", "srt://127.0.0.1:\(port)?mode=listener\(query)", "file://con"]
        p.standardOutput = FileHandle(forWritingAtPath: path)
        p.standardError = FileHandle.nullDevice
        try p.run()
        usleep(300_000)
        return p
    }

    private func pushSixSeconds(query: String, receiverQuery: String) throws -> (run: CLI.Result, received: String) {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let received = dir + "/received.ts"
        let slt = try Self.receiver(port: port, query: receiverQuery, to: received)
        defer { if slt.isRunning { kill(slt.processIdentifier, SIGKILL) } }
        CLI.write(SrtPushTests.pipe(url: "srt://127.0.0.1:\(port)\(query)", seconds: 6), to: dir + "/push.pipe")
        let r = try CLI.run(["run", dir + "/push.pipe", "--events", "json"], timeout: 60)
        let end = Date().addingTimeInterval(10)
        while slt.isRunning && Date() < end { usleep(50_000) }
        XCTAssertFalse(slt.isRunning, "srt-live-transmit saw the caller hang up")
        return (r, received)
    }

    private func assertWhole(_ received: String, _ what: String) throws {
        let probe = try CLI.probe(received)
        XCTAssertEqual(CLI.stream(probe, "video")?["codec_name"] as? String, "h264", what)
        XCTAssertEqual(CLI.stream(probe, "audio")?["codec_name"] as? String, "aac", what)
        let s = try SrtPushTests.seconds(received)
        let pictures = try CLI.videoFrameTimes(received)
        print("\(what): \(pictures.count) pictures, video \(s.video) s, audio \(s.audio) s")
        // 6 s at 30 pictures a second; the linger lets the last messages arrive.
        XCTAssertEqual(pictures.count, 180, "\(what): every picture arrived")
        XCTAssertEqual(s.video, 6, accuracy: 0.1, "\(what): seconds of video")
        XCTAssertEqual(s.audio, 6, accuracy: 0.1, "\(what): seconds of audio")
    }

    func testSrtLiveTransmitReceivesTheWholeStream() throws {
        let (r, received) = try pushSixSeconds(query: "?latency=200000", receiverQuery: "")
        XCTAssertEqual(r.status, 0, r.stderr)
        try assertWhole(received, "plain")
    }

    func testEncryptedWithAPassphraseAndWrongPassphraseRefused() throws {
        let secret = "caller-secret-4242"
        let (r, received) = try pushSixSeconds(query: "?passphrase=\(secret)&pbkeylen=16&streamid=publish:cam",
                                               receiverQuery: "&passphrase=\(secret)&pbkeylen=16")
        XCTAssertEqual(r.status, 0, r.stderr)
        try assertWhole(received, "passphrase, pbkeylen 16")
        XCTAssertFalse(r.stdout.contains(secret) || r.stderr.contains(secret), "the passphrase is not printed")

        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let slt = try Self.receiver(port: port, query: "&passphrase=\(secret)&pbkeylen=16", to: dir + "/refused.ts")
        defer { if slt.isRunning { kill(slt.processIdentifier, SIGKILL) } }
        let wrong = "the-wrong-passphrase"
        CLI.write(SrtPushTests.pipe(url: "srt://127.0.0.1:\(port)?passphrase=\(wrong)", seconds: 6)
            .replacingOccurrences(of: "attempts: 20", with: "attempts: 1"), to: dir + "/push.pipe")
        let refused = try CLI.run(["run", dir + "/push.pipe", "--events", "json"], timeout: 60)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        print("wrong passphrase: \(refused.stderr.split(separator: "\n").first { $0.contains("SRT call failed") } ?? "")")
        XCTAssertTrue(refused.stderr.contains("srt://127.0.0.1:\(port)?passphrase=***: SRT call failed"), refused.stderr)
        XCTAssertFalse(refused.stdout.contains(wrong) || refused.stderr.contains(wrong), "the passphrase is not printed")
    }

    /// A 60 s push with `timeout: 2s` to srt-live-transmit, which is SIGSTOPped (it takes
    /// nothing, answers nothing) after 3 s of media; it is killed at teardown.
    private func stalledAfterThreeSeconds() throws -> (dir: String, run: BackgroundRun) {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let slt = try Self.receiver(port: port, to: dir + "/stalled.ts")
        addTeardownBlock { if slt.isRunning { kill(slt.processIdentifier, SIGCONT); kill(slt.processIdentifier, SIGKILL) } }
        CLI.write(SrtPushTests.pipe(url: "srt://127.0.0.1:\(port)", seconds: 60)
            .replacingOccurrences(of: "reconnect: {", with: "timeout: 2s, reconnect: {"), to: dir + "/push.pipe")
        let run = try BackgroundRun(["run", dir + "/push.pipe", "--events", "json"])
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { ($0["event"] as? String) == "stats" && ($0["media_time"] as? Double ?? 0) > 3 }, run.stderr)
        kill(slt.processIdentifier, SIGSTOP)
        return (dir, run)
    }

    /// Seconds from SIGINT to the run's exit.
    private static func secondsToEnd(_ run: BackgroundRun) -> Double {
        let interrupted = Date()
        kill(run.process.processIdentifier, SIGINT)
        _ = run.waitForExit(timeout: 30)
        return Date().timeIntervalSince(interrupted)
    }

    /// The receiver stops (SIGSTOP: it takes nothing, answers nothing) while the run sends; the
    /// run is then interrupted: it ends within the sink's timeout, the send never blocking on the
    /// stalled peer past it.
    func testInterruptedWhileTheReceiverIsStalledEndsWithinTheTimeout() throws {
        let (dir, run) = try stalledAfterThreeSeconds()
        usleep(1_000_000)
        let took = Self.secondsToEnd(run)
        print("stalled receiver: the run ended \(took) s after SIGINT")
        // The timeout (2 s) and the linger (1 s), with room for a loaded machine.
        XCTAssertLessThan(took, 5, "the end did not wait on the stalled receiver: \(run.stderr)")
        XCTAssertGreaterThan(try SrtPushTests.seconds(dir + "/stalled.ts").video, 2, "it received media before it stalled")
    }

    /// A receiver that stops answering (SIGSTOP) is taken as gone after the sink's timeout (2 s
    /// here: libsrt's peer-idle timeout), and called again; stopping the run while it calls a
    /// receiver that never answers ends it within the call's timeout.
    func testAStalledReceiverIsNoticedWithinTheTimeoutAndCalledAgain() throws {
        let (_, run) = try stalledAfterThreeSeconds()
        let stopped = Date()
        let gone = run.waitFor(timeout: 10) { $0["event"] as? String == "disconnected" }
        let noticed = Date().timeIntervalSince(stopped)
        print("stalled receiver: disconnected after \(noticed) s (\(gone?["reason"] ?? "none"))")
        XCTAssertNotNil(gone, "the stalled receiver was noticed: \(run.stderr)")
        XCTAssertLessThan(noticed, 4, "within the 2 s timeout, with room for a loaded machine")
        XCTAssertNotNil(run.waitFor(timeout: 5) { $0["event"] as? String == "reconnecting" }, run.stderr)
        let took = Self.secondsToEnd(run)
        print("stalled receiver, calling again: the run ended \(took) s after SIGINT")
        XCTAssertLessThan(took, 5, "the call to a receiver that does not answer did not hold up the end: \(run.stderr)")
    }

    /// libsrt takes each message at once (its send buffer holds seconds), so the sink's own queue
    /// stays empty on a narrow link: the backlog is seen only in `srt_bstats`' unacknowledged
    /// bytes, read on the sink's own socket. A link held to 0.8 Mbit/s by libsrt (`maxbw`,
    /// bytes/s) brings a 3 Mbit/s adaptive encoder down.
    func testAnAdaptiveEncoderFollowsTheBacklogLibsrtHolds() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let slt = try Self.receiver(port: port, to: dir + "/narrow.ts")
        defer { if slt.isRunning { kill(slt.processIdentifier, SIGKILL) } }
        CLI.write(SrtPushTests.pipe(url: "srt://127.0.0.1:\(port)?maxbw=100000", seconds: 10)
            .replacingOccurrences(of: "bitrate: 1000k}", with: "bitrate: 3000k, adaptive: {min: 200k}}"), to: dir + "/push.pipe")
        let r = try CLI.run(["run", dir + "/push.pipe", "--events", "json"], timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        let cuts = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["event"] as? String == "bitrate" && ($0["reason"] as? String ?? "").hasPrefix("live:") }
        print("narrow SRT link: \(cuts.map { "\($0["to"] ?? "?") (\($0["reason"] ?? ""))" })")
        XCTAssertLessThan(cuts.compactMap { $0["to"] as? Int }.min() ?? .max, 1_000_000, "the encoder came down to what the link carries")
    }

    func testCheckNamesAnUnknownOrWrongURLOption() throws {
        let dir = CLI.scratch()
        CLI.write(SrtPushTests.pipe(url: "srt://127.0.0.1:9000?latncy=200000&passphrase=0123456789", seconds: 1), to: dir + "/typo.pipe")
        let typo = try CLI.run(["check", dir + "/typo.pipe"])
        XCTAssertNotEqual(typo.status, 0)
        XCTAssertTrue((typo.stdout + typo.stderr).contains("unknown SRT option 'latncy'"), typo.stdout + typo.stderr)
        CLI.write(SrtPushTests.pipe(url: "srt://127.0.0.1:9000?mode=listener", seconds: 1), to: dir + "/mode.pipe")
        let mode = try CLI.run(["check", dir + "/mode.pipe"])
        XCTAssertNotEqual(mode.status, 0)
        XCTAssertTrue((mode.stdout + mode.stderr).contains("only mode=caller"), mode.stdout + mode.stderr)
    }
}
