import AVGraphTesting
import Foundation
import XCTest

/// The `rtmp` sink's own RTMP client against receivers it did not write: PyAV's FFmpeg 8.1
/// listening (Enhanced RTMP HEVC passed through from a phone, byte for byte), and avgraph's own
/// RTMPS listener with a self-signed certificate the sink is told to trust (`ca`). nginx-rtmp
/// as receiver: RtmpTests, RestreamTests, AdaptiveBitrateTests.
final class RtmpClientTests: XCTestCase {
    /// Waits until something listens on 127.0.0.1:`port` (TCP), without connecting to it: a
    /// single-connection listener (FFmpeg's) would take the probe for its client.
    private func waitListening(_ port: Int, timeout: Double = 20) -> Bool {
        let hex = String(format: ":%04X ", port)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let table = (try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)) ?? ""
            if table.split(separator: "\n").contains(where: { $0.contains(hex) && $0.split(separator: " ")[3] == "0A" }) { return true }
            Thread.sleep(forTimeInterval: 0.1)
        }
        return false
    }

    /// PyAV (FFmpeg 8.1) listening as an RTMP server for one publisher, writing what it
    /// receives, remuxed as it came, to `output` (Matroska).
    private func pyAvReceiver(_ dir: String, port: Int, output: String) throws -> Process {
        let script = """
        import av, sys
        # One publisher. FFmpeg's listener ends a publish that hangs up with an I/O error, not
        # an end of file (so it does with ffmpeg's own client publishing): that error is the end.
        with av.open(sys.argv[1], format='flv', options={'listen': '1', 'timeout': '60'}) as src, av.open(sys.argv[2], 'w') as out:
            kept = [s for s in src.streams if s.type in ('video', 'audio')]
            written = dict(zip((s.index for s in kept), (out.add_stream_from_template(s) for s in kept)))
            try:
                for packet in (p for p in src.demux(*kept) if p.dts is not None):
                    packet.stream = written[packet.stream.index]
                    out.mux(packet)
            except av.error.OSError as e:
                print('receiver: the publisher hung up (%s)' % e, file=sys.stderr)
        """
        CLI.write(script, to: dir + "/receiver.py")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", dir + "/receiver.py", "rtmp://127.0.0.1:\(port)/live/x", output]
        _ = FileManager.default.createFile(atPath: dir + "/receiver.log", contents: nil)
        p.standardError = FileHandle(forWritingAtPath: dir + "/receiver.log")
        try p.run()
        addTeardownBlock { if p.isRunning { p.terminate() } }
        return p
    }

    /// An HEVC phone (12 s, 720x1280, 30 fps) publishes over Enhanced RTMP to an avgraph run whose
    /// `h265 passthrough: auto` hands its packets to the `rtmp` sink undecoded and unencoded; the
    /// sink publishes them as Enhanced RTMP (`hvc1`) to FFmpeg 8.1, which receives every picture
    /// byte for byte as the phone sent it, and the AAC audio.
    func testHevcPhonePassedThroughToFfmpegOverEnhancedRtmp() throws {
        let dir = CLI.scratch()
        try HevcPassthroughTests.phoneClip(dir, idr: true)
        let (inPort, outPort) = (try LoopbackPort.free(), try LoopbackPort.free())
        let receiver = try pyAvReceiver(dir, port: outPort, output: dir + "/received.mkv")
        XCTAssertTrue(waitListening(outPort), "PyAV listens")
        CLI.write("""
        pipeline: hevc-out
        nodes:
          src:   {type: rtmp, listen: true, idle: 2s, size: 720x1280, url: "rtmp://127.0.0.1:\(inPort)/live/phone"}
          video: {type: h265, in: src.video, passthrough: auto}
          audio: {type: aac, in: src.audio}
          out:   {type: rtmp, in: [video, audio], url: "rtmp://127.0.0.1:\(outPort)/live/x"}
        """, to: dir + "/p.pipe")
        var env = ProcessInfo.processInfo.environment
        env["AVGRAPH_KEYS"] = nil
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json"], cwd: dir, environment: env)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        let (status, result) = try ErtmpPublisher.publish("rtmp://127.0.0.1:\(inPort)/live/phone", dir,
                                                          ["--video", dir + "/v.hevc", "--codec", "hvc1", "--audio", dir + "/a.aac",
                                                           "--sent", dir + "/sent.bin"])
        XCTAssertEqual(status, 0, "\(result)")
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        receiver.waitUntilExit()
        let said = (try? String(contentsOfFile: dir + "/receiver.log", encoding: .utf8)) ?? ""
        XCTAssertEqual(receiver.terminationStatus, 0, "PyAV received and wrote the stream: \(said)")
        let names = run.events.compactMap { $0["event"] as? String }
        XCTAssertFalse(names.contains("disconnected"), "one session: \(Set(names))")

        let probe = try CLI.probe(dir + "/received.mkv")
        let v = try XCTUnwrap(CLI.stream(probe, "video")), a = try XCTUnwrap(CLI.stream(probe, "audio"))
        XCTAssertEqual(v["codec_name"] as? String, "hevc")
        XCTAssertEqual(v["width"] as? Int, 720)
        XCTAssertEqual(v["height"] as? Int, 1280)
        XCTAssertEqual(a["codec_name"] as? String, "aac")
        let times = try CLI.videoFrameTimes(dir + "/received.mkv")
        let seconds = (times.last ?? 0) - (times.first ?? 0) + 1.0 / 30
        let sent = try HevcPassthroughTests.sentPackets(dir + "/sent.bin")
        let received = try HevcPassthroughTests.recordedPackets(dir + "/received.mkv")
        let same = zip(sent, received).filter { $0 == $1.bytes }.count
        print("hevc out: \(received.count) pictures received of \(sent.count) sent, \(same) byte for byte; \(seconds) s; "
              + "audio \(Double(try CLI.samples(dir + "/received.mkv").count) / 44100) s")
        XCTAssertEqual(sent.count, HevcPassthroughTests.seconds * 30)
        XCTAssertEqual(received.count, sent.count, "every picture received")
        XCTAssertEqual(same, sent.count, "each as the phone sent it (passed through, not encoded again)")
        XCTAssertEqual(received.first?.key, true, "the first is a keyframe")
        XCTAssertEqual(seconds, Double(HevcPassthroughTests.seconds), accuracy: 0.1)
        XCTAssertEqual(Double(try CLI.samples(dir + "/received.mkv").count) / 44100, Double(HevcPassthroughTests.seconds), accuracy: 0.3)
        let decode = try Tool.run(["ffmpeg", "-v", "error", "-xerror", "-i", dir + "/received.mkv", "-f", "null", "-"])
        XCTAssertEqual(decode.status, 0, decode.stderr)
    }

    /// `h265` encoding (x265: Annex B parameter sets) pushed as Enhanced RTMP: the
    /// sink makes the hvcC itself; FFmpeg 8.1 receives every picture and decodes it cleanly.
    func testH265EncodedInTheRunIsSentAsEnhancedRtmpAndFfmpegDecodesIt() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let receiver = try pyAvReceiver(dir, port: port, output: dir + "/received.mkv")
        XCTAssertTrue(waitListening(port), "PyAV listens")
        CLI.write("""
        pipeline: h265-out
        realtime: true
        nodes:
          screen: {type: testsrc, size: 640x360, rate: 30}
          tone:   {type: tone, freq: 440, rate: 48000, channels: 2}
          video:  {type: h265, in: screen, bitrate: 1M}
          audio:  {type: aac, in: tone}
          out:    {type: rtmp, in: [video, audio], url: "rtmp://127.0.0.1:\(port)/live/x"}
        """, to: dir + "/p.pipe")
        let run = try CLI.run(["run", dir + "/p.pipe", "--duration", "4s", "--events", "json"], cwd: dir, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        receiver.waitUntilExit()
        let probe = try CLI.probe(dir + "/received.mkv")
        let v = try XCTUnwrap(CLI.stream(probe, "video"))
        XCTAssertEqual(v["codec_name"] as? String, "hevc")
        XCTAssertEqual([v["width"] as? Int, v["height"] as? Int], [640, 360])
        let frames = try CLI.videoFrameTimes(dir + "/received.mkv").count
        // What x265 made (the last stats event, up to a second before the end): a loaded machine
        // loses test pictures before the encoder now and then; the sink must lose none of its packets.
        let stats = run.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .last { $0["event"] as? String == "stats" }
        let nodes = stats?["nodes"] as? [[String: Any]] ?? []
        let encoded = (nodes.first { $0["node"] as? String == "video" }?["emitted"] as? [Int])?.first ?? 0
        print("h265 out: \(frames) pictures received, \(encoded) encoded by the last stats, of 4 s at 30 fps")
        XCTAssertGreaterThanOrEqual(frames, encoded, "every picture encoded was received")
        XCTAssertGreaterThan(frames, 100, "pictures")
        let decode = try Tool.run(["ffmpeg", "-v", "error", "-xerror", "-i", dir + "/received.mkv", "-f", "null", "-"])
        XCTAssertEqual(decode.status, 0, decode.stderr)
    }

    /// A certificate for 127.0.0.1 (as its subject alternative name, which TLS clients check).
    private func certificate(_ dir: String) throws -> (cert: String, key: String) {
        let cert = dir + "/server.pem", key = dir + "/server.key"
        _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                           "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
        return (cert, key)
    }

    /// live-rtmp.pipe pushing 10 s over rtmps:// to avgraph's own RTMPS listener, its certificate
    /// trusted with `ca`: the listener records every second of it. Without `ca` the system's
    /// store does not know the certificate: the run fails naming the sink and why.
    func testRtmpsToOurOwnListenerWithItsCertificateTrustedIsRecordedWhole() throws {
        let dir = CLI.scratch()
        let (cert, key) = try certificate(dir)
        let port = try LoopbackPort.free()
        let url = "rtmps://127.0.0.1:\(port)/live/phone"
        CLI.write(NetworkAuthTests.pipe("url: \"\(url)\", cert: \(cert), key: \(key)"), to: dir + "/listen.pipe")
        let listener = try BackgroundRun(["run", dir + "/listen.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if listener.process.isRunning { listener.process.terminate() } }
        XCTAssertNotNil(listener.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, listener.stderr)

        let untrusted = try CLI.run(["run", CLI.packageRoot + "/pipelines/live-rtmp.pipe", "--duration", "10s", "--set", "live.url=\(url)",
                                     "--set", "live.reconnect={attempts: 1, backoff: 200ms..200ms}", "--set", "record.path=\(dir)/untrusted.mp4",
                                     "--set", "screen.size=390x844"],
                                    timeout: 60)
        XCTAssertEqual(untrusted.status, 1)
        XCTAssertTrue(untrusted.stderr.contains("live (rtmp): ") && untrusted.stderr.lowercased().contains("certificate"), untrusted.stderr)

        let pushed = try CLI.run(["run", CLI.packageRoot + "/pipelines/live-rtmp.pipe", "--duration", "10s", "--events", "json",
                                  "--set", "live.url=\(url)", "--set", "live.ca=\(cert)", "--set", "record.path=\(dir)/record.mp4",
                                  // A smaller phone screen: less work beside the listener's encoder on 2 shared cores.
                                  "--set", "screen.size=390x844"], timeout: 60)
        XCTAssertEqual(pushed.status, 0, pushed.stderr)
        XCTAssertFalse(pushed.stdout.contains("\"disconnected\""), "one session")
        XCTAssertEqual(listener.waitForExit(timeout: 30), 0, listener.stderr)
        let d = try RtmpsTests.durations(dir + "/out.mp4")
        let frames = try CLI.videoFrameTimes(dir + "/out.mp4").count
        print("rtmps out: 10 s pushed, recorded video \(d.video) s (\(frames) pictures), audio \(d.audio) s")
        XCTAssertEqual(d.video, 10, accuracy: 0.3, "video")
        XCTAssertEqual(d.audio, 10, accuracy: 0.3, "audio")
        XCTAssertEqual(Double(frames), 300, accuracy: 6, "pictures")
    }
}
