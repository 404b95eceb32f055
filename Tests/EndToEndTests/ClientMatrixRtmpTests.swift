import AVGraphTesting
import Foundation
import XCTest

/// The client matrix, RTMP rows: publishers nobody here wrote (ffmpeg, GStreamer's rtmp2sink,
/// PyAV's FFmpeg 8.1) or written from the published specification (ErtmpPublisher), each into a
/// `listen: true` rtmp source recording to MP4. Each row: 6 +- 0.2 s of video and audio
/// recorded (ffprobe), every flash within 20 ms of its beep (FlashBeep), the publisher's exit
/// status 0. Also: Enhanced RTMP HEVC and AV1 phones, a phone turned twice mid-stream (legacy
/// AVC and E-RTMP HEVC), and the delay of the acknowledgements phone apps steer their bitrate by.
final class ClientMatrixRtmpTests: XCTestCase {
    static let seconds = 6

    /// The listening source -> upright -> fit 1280x720 -> H.264 + AAC -> MP4, ending 5 s after
    /// the publisher left. The pictures' edges block rather than drop, and x264 runs ultrafast:
    /// on 2 cores shared with builds the encoder falls behind now and then, and a row judges
    /// what the source gave (and the listener's acks, while the pipeline keeps up).
    private func startRun(_ dir: String, port: Int, options: String = "") throws -> BackgroundRun {
        CLI.write("""
            pipeline: matrix
            memory-limit: 512MB
            nodes:
              src: {type: rtmp, url: "rtmp://127.0.0.1:\(port)/live/phone", listen: true, idle: 5s\(options)}
              up: {type: orient, in: src.video, queue: {size: 30, policy: block}}
              fit: {type: resize, in: up, size: 1280x720, mode: fit, queue: {size: 30, policy: block}}
              v: {type: h264, in: fit, preset: ultrafast, queue: {size: 30, policy: block}}
              a: {type: aac, in: src.audio}
              out: {type: file, in: [v, a], path: out.mp4}
            """, to: dir + "/matrix.pipe")
        let run = try BackgroundRun(["run", dir + "/matrix.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, "no listening event: \(run.stderr)")
        return run
    }

    /// One row: its media made (`prepare`, before the run listens: its `idle` counts from the
    /// start), the run listening, `publish` (its exit status) against its URL, the recording judged.
    @discardableResult
    private func row(_ name: String, file: StaticString = #filePath, line: UInt = #line, prepare: (_ dir: String) throws -> Void = { _ in },
                     publish: (_ url: String, _ dir: String) throws -> Int32) throws -> (run: BackgroundRun, path: String) {
        let dir = CLI.scratch(name)
        _ = Self.clip
        try prepare(dir)
        let port = try LoopbackPort.free()
        let run = try startRun(dir, port: port)
        let status = try publish("rtmp://127.0.0.1:\(port)/live/phone", dir)
        XCTAssertEqual(status, 0, "\(name): the publisher's exit status", file: file, line: line)
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr, file: file, line: line)
        let path = dir + "/out.mp4"
        try assertRow(name, path, file: file, line: line)
        return (run, path)
    }

    private func assertRow(_ name: String, _ path: String, file: StaticString, line: UInt) throws {
        let probe = try CLI.probe(path)
        let v = try XCTUnwrap(CLI.stream(probe, "video"), "\(name): no video in \(path)", file: file, line: line)
        XCTAssertEqual(v["width"] as? Int, 1280, file: file, line: line)
        XCTAssertEqual(v["height"] as? Int, 720, file: file, line: line)
        let times = try CLI.videoFrameTimes(path)
        let video = (times.last ?? 0) - (times.first ?? 0) + 1.0 / 30
        let audio = Double(try CLI.samples(path, rate: 48000).count) / 48000
        let m = try FlashBeep.measure(path)
        print("matrix row \(name): video \(String(format: "%.3f", video)) s (\(times.count) frames), audio \(String(format: "%.3f", audio)) s, "
              + "flash minus beep ms \(m.offsets.map { Int(($0 * 1000).rounded()) })")
        XCTAssertEqual(video, Double(Self.seconds), accuracy: 0.2, "\(name): seconds of video recorded", file: file, line: line)
        XCTAssertEqual(audio, Double(Self.seconds), accuracy: 0.2, "\(name): seconds of audio recorded", file: file, line: line)
        XCTAssertEqual(times.count, 30 * Self.seconds, accuracy: 2, "\(name): pictures recorded", file: file, line: line)
        FlashBeep.assertInSync(m, atLeast: Self.seconds, tolerance: 0.020, file: file, line: line)
    }

    /// The 6 s portrait flash/beep clip (H.264/AAC 48 kHz), made once.
    private static let clip: String = {
        let path = CLI.scratch("matrix-media") + "/flashbeep.mp4"
        try? FlashBeep.makeClip(path, seconds: seconds)
        return path
    }()

    /// ffmpeg from `clip` with `args` (output options and file): what a test publishes.
    private static func transcode(_ args: [String]) throws {
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-i", clip] + args)
    }

    /// The Enhanced RTMP publisher's result (its JSON) and exit status.
    private func ertmpPublish(_ url: String, _ dir: String, _ args: [String]) throws -> (Int32, [String: Any]) {
        try ErtmpPublisher.publish(url, dir, args)
    }

    private func warnings(_ run: BackgroundRun) -> [String] {
        run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
    }

    /// Audio in a codec avgraph does not decode (FLV sound format 13, reserved) costs the audio,
    /// said once, not the pictures.
    func testAudioAvgraphCannotDecodeIsIgnoredAndThePicturesAreRecorded() throws {
        let dir = CLI.scratch()
        _ = Self.clip
        try Self.transcode(["-t", "3", "-c:v", "libx264", "-preset", "ultrafast", "-g", "30", "-an", "-f", "h264", dir + "/v.h264",
                            "-vn", "-c:a", "copy", "-f", "adts", dir + "/a.aac"])
        let port = try LoopbackPort.free()
        let run = try startRun(dir, port: port)
        let (status, _) = try ertmpPublish("rtmp://127.0.0.1:\(port)/live/phone", dir, ["--video", dir + "/v.h264", "--codec", "avc1",
                                                                                     "--audio", dir + "/a.aac", "--audio-format", "13"])
        XCTAssertEqual(status, 0)
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        let said = warnings(run).filter { $0.contains("its audio codec (FLV sound format 13) is not one avgraph decodes: its audio is ignored") }
        XCTAssertEqual(said.count, 1, "\(warnings(run))")
        XCTAssertEqual(try CLI.videoFrameTimes(dir + "/out.mp4").count, 90, accuracy: 2, "the pictures recorded")
        XCTAssertNil(CLI.stream(try CLI.probe(dir + "/out.mp4"), "audio"), "no audio recorded")
    }

    /// `max-size` is read from HEVC's SPS and AV1's sequence header OBU before any picture is
    /// decoded: a 720x1280 phone is refused by a source that takes 640x640 at most.
    func testHevcAndAv1OverMaxSizeAreRefusedFromTheirSequenceHeaders() throws {
        for (codec, format, encoder) in [("hvc1", "hevc", ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error"]),
                                         ("av01", "ivf", ["-c:v", "libsvtav1", "-preset", "12"])] {
            let dir = CLI.scratch("max-size-\(codec)")
            try Self.transcode(["-t", "1", "-an"] + encoder + ["-f", format, dir + "/v." + format])
            let port = try LoopbackPort.free()
            let run = try startRun(dir, port: port, options: ", max-size: 640x640")
            let (status, _) = try ertmpPublish("rtmp://127.0.0.1:\(port)/live/phone", dir, ["--video", dir + "/v." + format, "--codec", codec])
            XCTAssertNotEqual(status, 0, "\(codec): the publisher was cut off")
            let refusal = run.waitFor(timeout: 10) { ($0["message"] as? String ?? "").contains("refused: 720x1280 pictures are over max-size 640x640") }
            XCTAssertNotNil(refusal, "\(codec): \(warnings(run))")
            XCTAssertFalse(run.events.contains { $0["event"] as? String == "publisher" }, "\(codec): no session began")
            run.process.terminate()
            _ = run.waitForExit(timeout: 20)
        }
    }

    // MARK: rows

    func testFfmpegPublishesH264() throws {
        try row("ffmpeg") { url, _ in
            try NetworkIngestTests.publish(["-re", "-i", Self.clip, "-c", "copy", "-f", "flv", url])
        }
    }

    func testGStreamerRtmp2sinkPublishesH264() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: "/usr/bin/gst-launch-1.0"), "GStreamer is not installed (scripts/setup installs it)")
        // The clip as FLV: its timestamps already shifted for AAC's priming (qtdemux would not
        // apply the MP4's edit list to it, and the sound would come a frame late).
        try row("rtmp2sink", prepare: { dir in try Self.transcode(["-c", "copy", dir + "/clip.flv"]) }) { url, dir in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/gst-launch-1.0")
            p.arguments = ["-q", "filesrc", "location=\(dir)/clip.flv", "!", "flvdemux", "name=d",
                           "d.video", "!", "queue", "!", "h264parse", "!", "flvmux", "name=m", "streamable=true", "!", "rtmp2sink", "location=\(url)",
                           "d.audio", "!", "queue", "!", "aacparse", "!", "m."]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            return p.terminationStatus
        }
    }

    /// HEVC (x265) at 6 Mbit/s over Enhanced RTMP from the publisher written from the
    /// specification, which asks for an Acknowledgement every 100 000 bytes: each window's ack
    /// comes within 10 ms (p99) of its last byte.
    func testEnhancedRtmpHevcPhoneIsRecordedAndEachWindowIsAcknowledgedWithin10ms() throws {
        var result: [String: Any] = [:]
        try row("ertmp-hevc", prepare: { dir in
            // Noise keeps x265 at the bitrate: 6 Mbit/s of pictures a phone's camera would make.
            try Self.transcode(["-vf", "noise=alls=24:allf=t", "-c:v", "libx265", "-preset", "ultrafast", "-b:v", "6M",
                                "-x265-params", "bframes=0:keyint=30:vbv-maxrate=6000:vbv-bufsize=1000:log-level=error",
                                "-an", "-f", "hevc", dir + "/v.hevc", "-vn", "-c:a", "copy", "-f", "adts", dir + "/a.aac"])
        }) { url, dir in
            let (status, r) = try ertmpPublish(url, dir, ["--video", dir + "/v.hevc", "--codec", "hvc1", "--audio", dir + "/a.aac",
                                                          "--window", "100000"])
            result = r
            return status
        }
        let server = result["server"] as? [String: Any] ?? [:]
        XCTAssertEqual(server["fourCcList"] as? [String], ["avc1", "hvc1", "av01", "mp4a"], "connect's answer: \(server)")
        XCTAssertNotNil(server["videoFourCcInfoMap"], "connect's answer: \(server)")
        let bytes = result["bytes"] as? Int ?? 0
        print("ack delay at \(String(format: "%.1f", Double(bytes) * 8 / Double(Self.seconds) / 1e6)) Mbit/s, 100000-byte window: "
              + "\(result["windows"] ?? 0) windows, p50 \(result["p50"] ?? "-") ms, p99 \(result["p99"] ?? "-") ms, max \(result["max"] ?? "-") ms")
        XCTAssertGreaterThan(Double(bytes) * 8 / Double(Self.seconds), 5e6, "the publisher sent about 6 Mbit/s")
        XCTAssertGreaterThanOrEqual(result["windows"] as? Int ?? 0, bytes / 100_000 - 1, "every window acknowledged")
        XCTAssertLessThan(result["p99"] as? Double ?? 1e9, 10, "p99 ack delay, ms")
    }

    /// AV1 (SVT-AV1) over Enhanced RTMP, sent as two tracks (multitrack): the first is recorded,
    /// a warning says once that the other is ignored.
    func testEnhancedRtmpAv1MultitrackPhoneIsRecordedFromItsFirstTrack() throws {
        let (run, _) = try row("ertmp-av1", prepare: { dir in
            try Self.transcode(["-c:v", "libsvtav1", "-preset", "12", "-g", "30", "-svtav1-params", "pred-struct=1",
                                "-an", "-f", "ivf", dir + "/v.ivf", "-vn", "-c:a", "copy", "-f", "adts", dir + "/a.aac"])
        }) { url, dir in
            return try ertmpPublish(url, dir, ["--video", dir + "/v.ivf", "--codec", "av01", "--audio", dir + "/a.aac", "--multitrack"]).0
        }
        XCTAssertEqual(warnings(run).filter { $0.contains("sends several video tracks") }.count, 1,
                       "one warning for the ignored track: \(warnings(run))")
    }

    /// PyAV (FFmpeg 8.1, whose flv muxer writes Enhanced RTMP for HEVC and AV1): a second E-RTMP
    /// publisher nobody here wrote, remuxing an x265 (B-frames: composition times) or SVT-AV1
    /// clip to avgraph in real time.
    func testPyAvPublishesHevcOverEnhancedRtmp() throws {
        try pyAvRow("pyav-hevc", ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "keyint=30:log-level=error", "-tag:v", "hvc1"])
    }

    func testPyAvPublishesAv1OverEnhancedRtmp() throws {
        try pyAvRow("pyav-av1", ["-c:v", "libsvtav1", "-preset", "12", "-g", "30"])
    }

    private func pyAvRow(_ name: String, _ encoder: [String]) throws {
        try row(name, prepare: { dir in
            try Self.transcode(encoder + ["-c:a", "copy", dir + "/clip.mp4"])
        }) { url, dir in
            let script = """
            import av, sys, time
            try:
                src = av.open(sys.argv[1])
            except Exception as e:
                sys.exit('PyAV: %s' % e)
            out = av.open(sys.argv[2], mode='w', format='flv')
            pairs = {s.index: out.add_stream_from_template(s, opaque=True) for s in src.streams if s.type in ('video', 'audio')}
            start = time.monotonic()
            for p in src.demux():
                if p.dts is None or p.stream.index not in pairs: continue
                wait = start + float(p.dts * p.time_base) - time.monotonic()
                if wait > 0: time.sleep(wait)
                p.stream = pairs[p.stream.index]
                out.mux(p)
            out.close()
            """
            CLI.write(script, to: dir + "/pyav.py")
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["python3", dir + "/pyav.py", dir + "/clip.mp4", url]
            let err = Pipe()
            p.standardError = err
            try p.run()
            let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            XCTAssertFalse(errors.contains("No module named 'av'"), "PyAV is not installed: pip install av")
            return p.terminationStatus
        }
    }

    // MARK: a phone turned

    /// A phone turned twice: 2 s portrait (720x1280), 2 s landscape (1280x720), 2 s portrait, each
    /// part a new sequence header at a keyframe, over legacy RTMP (AVC) and Enhanced RTMP (HEVC).
    func testPhoneTurnedTwiceOverLegacyAvcIsRecordedWholeAt1280x720() throws {
        try turned(codec: "avc1")
    }

    func testPhoneTurnedTwiceOverEnhancedRtmpHevcIsRecordedWholeAt1280x720() throws {
        try turned(codec: "hvc1")
    }

    /// HEVC as legacy FLV codec id 12 (what some apps and CDNs send), turned too.
    func testPhoneTurnedTwiceOverLegacyHevcCodecId12IsRecordedWholeAt1280x720() throws {
        try turned(codec: "hevc12")
    }

    private func turned(codec: String) throws {
        let hevc = codec != "avc1"
        var headers = 0
        let (_, path) = try row("turned-\(codec)", prepare: { dir in
            try Self.turnedParts(dir, hevc: hevc)
            try Self.transcode(["-vn", "-c:a", "copy", "-f", "adts", dir + "/a.aac"])
        }) { url, dir in
            let (status, r) = try ertmpPublish(url, dir, ["--video", dir + "/turned.es", "--codec", codec, "--audio", dir + "/a.aac"])
            headers = r["headers"] as? Int ?? 0
            return status
        }
        XCTAssertEqual(headers, 3, "three sequence headers sent")
        try Self.assertTurnedTwice(path, codec)
    }

    /// `dir/turned.es`: 2 s portrait (720x1280), 2 s landscape (1280x720), 2 s portrait as one
    /// H.264 or HEVC elementary stream, each part starting at a keyframe with its own parameter sets.
    static func turnedParts(_ dir: String, hevc: Bool) throws {
        var parts = Data()
        for (k, size) in ["720x1280", "1280x720", "720x1280"].enumerated() {
            let part = dir + "/part\(k)." + (hevc ? "hevc" : "h264")
            let encoder = hevc ? ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "bframes=0:keyint=30:log-level=error"]
                : ["-c:v", "libx264", "-preset", "ultrafast", "-g", "30"]
            _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                               "color=c=black:s=\(size):r=30:d=2,drawbox=x=0:y=0:w=iw:h=ih:c=white:t=fill:enable='eq(mod(n\\,30)\\,15)'"]
                              + encoder + ["-pix_fmt", "yuv420p", "-f", hevc ? "hevc" : "h264", part])
            parts.append(try Data(contentsOf: URL(fileURLWithPath: part)))
        }
        try parts.write(to: URL(fileURLWithPath: dir + "/turned.es"))
    }

    /// The recording of a phone turned twice (`turnedParts`): whole, no green or torn picture, and
    /// each part fitted at its own size.
    static func assertTurnedTwice(_ path: String, _ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        // Whole: every picture recorded, none green or torn (black and white pictures: chroma neutral).
        let times = try CLI.videoFrameTimes(path)
        XCTAssertEqual(times.count, 30 * seconds, accuracy: 3, "pictures recorded", file: file, line: line)
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }
        XCTAssertLessThan(steps.max() ?? 1, 1.0 / 30 + 0.005, "no hole in the video", file: file, line: line)
        let w = 64, h = 36
        let raw = try CLI.capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                                   "-vf", "scale=\(w):\(h)", "-pix_fmt", "yuv444p", "-f", "rawvideo", "-"])
        let frames = stride(from: 0, to: raw.count - 3 * w * h + 1, by: 3 * w * h).map { raw[$0..<$0 + 3 * w * h] }
        var coloured: [Int] = []
        for (i, f) in frames.enumerated() {
            let chroma = f.dropFirst(w * h)
            let off = chroma.reduce(0) { $0 + abs(Int($1) - 128) } / chroma.count
            if off > 4 { coloured.append(i) }
        }
        XCTAssertEqual(coloured, [], "pictures that are not black and white (green or garbage)", file: file, line: line)
        // resize took each part's own size: a landscape flash fills the frame, a portrait one leaves black bars.
        let flashes = frames.indices.filter { i in
            let y = frames[i].prefix(w * h)
            return Int(y[y.startIndex + (h / 2) * w + w / 2]) > 200
        }
        let edges = flashes.map { i -> Int in
            let y = frames[i].prefix(w * h)
            return Int(y[y.startIndex + (h / 2) * w + 1])
        }
        print("turned \(name): \(times.count) pictures, flash left-edge luma \(edges)")
        XCTAssertEqual(edges.count, seconds, "one flash a second", file: file, line: line)
        XCTAssertEqual(edges.map { $0 > 200 }, [false, false, true, true, false, false], "portrait, landscape, portrait", file: file, line: line)
    }
}
