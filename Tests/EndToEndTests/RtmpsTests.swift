import AVGraphTesting
import Foundation
import XCTest

/// The `rtmp` source on SwiftNIO as its own server: RTMPS (a self-signed certificate made here
/// with openssl) with ffmpeg as the phone, a plain-RTMP client and a wrong key at the TLS port,
/// a bad certificate at `check` and at start, and GStreamer's `rtmp2sink` ending a publish
/// cleanly. Every recording is measured with ffprobe.
final class RtmpsTests: XCTestCase {
    /// A self-signed certificate for 127.0.0.1 and its key, PEM files in `dir`.
    static func certificate(_ dir: String, name: String = "server") throws -> (cert: String, key: String) {
        let cert = dir + "/\(name).pem", key = dir + "/\(name).key"
        _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                           "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1"])
        return (cert, key)
    }

    /// Each stream's duration in `path` as ffprobe reads it.
    static func durations(_ path: String) throws -> (video: Double, audio: Double) {
        let probe = try CLI.probe(path)
        func seconds(_ type: String) -> Double { Double(CLI.stream(probe, type)?["duration"] as? String ?? "") ?? -1 }
        return (seconds("video"), seconds("audio"))
    }

    private func start(_ dir: String, _ source: String) throws -> BackgroundRun {
        CLI.write(NetworkAuthTests.pipe(source), to: dir + "/rtmps.pipe")
        let run = try BackgroundRun(["run", dir + "/rtmps.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, "no listening event: \(run.stderr)")
        return run
    }

    private func warnings(_ run: BackgroundRun) -> [String] {
        run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
    }

    func testRtmpsPublisherIsRecordedWholeAndAPlainClientAndAWrongKeyAreRefused() throws {
        let dir = CLI.scratch()
        let clip = try NetworkAuthTests.clip(dir)
        let (cert, key) = try Self.certificate(dir)
        let port = try LoopbackPort.free()
        let run = try start(dir, "url: \"rtmps://127.0.0.1:\(port)/live/phone\", cert: \(cert), key: \(key)")
        // FFmpeg's TLS does not verify the server by default (tls_verify=0), as a phone app told to trust it.
        XCTAssertNotEqual(try NetworkIngestTests.publish(["-re", "-t", "1", "-i", clip, "-c", "copy", "-f", "flv",
                                                          "rtmp://127.0.0.1:\(port)/live/phone"]), 0, "plain RTMP at the TLS port")
        XCTAssertNotEqual(try NetworkIngestTests.publish(["-re", "-t", "1", "-i", clip, "-c", "copy", "-f", "flv",
                                                          "rtmps://127.0.0.1:\(port)/live/intruder"]), 0, "a wrong key over TLS")
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmps://127.0.0.1:\(port)/live/phone"]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let said = warnings(run)
        XCTAssertTrue(said.contains { $0.hasPrefix("127.0.0.1:") && $0.contains("refused: not TLS") }, "\(said)")
        XCTAssertTrue(run.stderr.contains("warning: src (rtmp): 127.0.0.1:") && run.stderr.contains("refused: not TLS"), run.stderr)
        XCTAssertTrue(said.contains { $0.hasPrefix("127.0.0.1:") && $0.contains("refused: unknown key") }, "\(said)")
        XCTAssertFalse("\(run.events)\(run.stderr)".contains("intruder"), "no key printed")
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected"], "only the TLS publisher with the key became a session")
        let d = try Self.durations(dir + "/out.mp4")
        print("rtmps: 6 s published, recorded video \(d.video) s, audio \(d.audio) s")
        XCTAssertEqual(d.video, 6, accuracy: 0.2, "video")
        XCTAssertEqual(d.audio, 6, accuracy: 0.2, "audio")
    }

    /// A certificate file that holds no certificate, and a key of another certificate: `check`
    /// names the node, the option's place and the file; `run` stops at start with the same words.
    func testABadCertificateOrKeyIsACheckErrorNamingTheNodeAndTheFileAndARunFailsAtStart() throws {
        let dir = CLI.scratch()
        let (cert, _) = try Self.certificate(dir)
        let (_, otherKey) = try Self.certificate(dir, name: "other")
        CLI.write("not a certificate\n", to: dir + "/bad.pem")
        let port = try LoopbackPort.free()
        let cases: [(source: String, file: String, words: String)] = [
            ("cert: bad.pem, key: \(otherKey)", "bad.pem", "holds no PEM certificate"),
            ("cert: \(cert), key: \(otherKey)", "other.key", "does not belong to the certificate"),
            ("cert: \(cert), key: missing.key", "missing.key", "file not found"),
        ]
        for c in cases {
            CLI.write(NetworkAuthTests.pipe("url: \"rtmps://127.0.0.1:\(port)/live/phone\", \(c.source)"), to: dir + "/bad.pipe")
            let check = try CLI.run(["check", dir + "/bad.pipe"], cwd: dir)
            XCTAssertNotEqual(check.status, 0, c.source)
            let said = check.stdout + check.stderr
            XCTAssertTrue(said.contains("'src'") && said.contains(c.file) && said.contains(c.words), "\(c.source): \(said)")
            XCTAssertTrue(said.contains("bad.pipe:3:"), "the option's line in the file: \(said)")
            let run = try CLI.run(["run", dir + "/bad.pipe"], cwd: dir, timeout: 30)
            XCTAssertEqual(run.status, 1, run.stderr)
            XCTAssertTrue(run.stderr.contains(c.file) && run.stderr.contains(c.words), "\(c.source): \(run.stderr)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out.mp4"), "nothing recorded")
        }
        // rtmps:// to listen on without a certificate is refused too.
        CLI.write(NetworkAuthTests.pipe("url: \"rtmps://127.0.0.1:\(port)/live/phone\""), to: dir + "/bare.pipe")
        let bare = try CLI.run(["check", dir + "/bare.pipe"], cwd: dir)
        XCTAssertNotEqual(bare.status, 0)
        XCTAssertTrue((bare.stdout + bare.stderr).contains("takes a TLS certificate and its key"), bare.stdout + bare.stderr)
    }

    /// GStreamer's rtmp2sink (its own RTMP client) publishing 6 s of openh264 video and AAC
    /// audio, over RTMP and over RTMPS: the stop is answered as nginx-rtmp answers it and the
    /// client closes first, so it ends with exit status 0 (it said `Connection error: connection
    /// closed remotely` and exited 1 when the server closed first), and the recording holds the 6 s.
    func testGStreamerRtmp2sinkEndsItsPublishWithExitZeroAndIsRecordedWhole() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/gst-launch-1.0"), "GStreamer (scripts/setup installs it)")
        try publishWithRtmp2sink(tls: false)
    }

    func testGStreamerRtmp2sinkOverRtmpsEndsWithExitZeroAndIsRecordedWhole() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/gst-launch-1.0"), "GStreamer (scripts/setup installs it)")
        try publishWithRtmp2sink(tls: true)
    }

    private func publishWithRtmp2sink(tls: Bool) throws {
        let dir = CLI.scratch(tls ? "rtmp2sink-tls" : "rtmp2sink")
        let port = try LoopbackPort.free()
        var source = "url: \"rtmp\(tls ? "s" : "")://127.0.0.1:\(port)/live/phone\""
        if tls {
            let (cert, key) = try Self.certificate(dir)
            source += ", cert: \(cert), key: \(key)"
        }
        let run = try start(dir, source)
        // 180 pictures at 30 fps and 300 x 960 samples at 48 kHz: 6 s each, sent in realtime.
        // (The self-signed certificate is trusted by turning validation off, as a phone app told to.)
        let sink = ["rtmp2sink", "location=rtmp\(tls ? "s" : "")://127.0.0.1:\(port)/live/phone"] + (tls ? ["tls-validation-flags=0"] : [])
        let gst = try Tool.run(["gst-launch-1.0", "-e",
            "videotestsrc", "is-live=true", "num-buffers=180", "!", "video/x-raw,framerate=30/1,width=640,height=360", "!",
            "openh264enc", "gop-size=30", "!", "h264parse", "!", "flvmux", "name=m", "streamable=true", "!"] + sink + [
            "audiotestsrc", "is-live=true", "num-buffers=300", "samplesperbuffer=960", "!", "audio/x-raw,rate=48000,channels=2", "!",
            "voaacenc", "!", "aacparse", "!", "m."], timeout: 60)
        XCTAssertEqual(gst.status, 0, "gst-launch: \(gst.stdout)\(gst.stderr)")
        XCTAssertFalse((gst.stdout + gst.stderr).contains("closed remotely"), gst.stdout + gst.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected"])
        let d = try Self.durations(dir + "/out.mp4")
        print("rtmp2sink\(tls ? " over rtmps" : ""): 6 s published, exit \(gst.status), recorded video \(d.video) s, audio \(d.audio) s")
        XCTAssertEqual(d.video, 6, accuracy: 0.2, "video")
        XCTAssertEqual(d.audio, 6, accuracy: 0.2, "audio")
    }
}
