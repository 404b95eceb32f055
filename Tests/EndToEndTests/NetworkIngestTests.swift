import AVGraphTesting
import Foundation
import XCTest

/// The phone over the network: ffmpeg publishes (RTMP) or calls (SRT) a portrait H.264/AAC clip
/// to avgraph listening on loopback; the recording is decoded and judged: its length, its size,
/// and a white flash against a 1 kHz beep (both every 2 s) staying within one frame.
final class NetworkIngestTests: XCTestCase {
    /// Source -> orient -> fit 1280x720 -> H.264 + AAC -> MP4, ending 3 s after the publisher left.
    static func pipe(source: String) -> String {
        """
        pipeline: ingest-test
        nodes:
          src: {\(source), idle: 3s}
          up: {type: orient, in: src.video}
          fit: {type: resize, in: up, size: 1280x720, mode: fit}
          v: {type: h264, in: fit}
          a: {type: aac, in: src.audio}
          out: {type: file, in: [v, a], path: out.mp4}
        """
    }

    /// An 8 s portrait (720x1280) phone clip: a white flash and a beep at 0, 2, 4 and 6 s.
    static func clip(_ dir: String) throws -> String {
        let path = dir + "/phone.mp4"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y",
                           "-f", "lavfi", "-i", "color=c=0x202020:s=720x1280:r=30:d=8,drawbox=c=white:t=fill:enable='lt(mod(t,2),0.1)'",
                           "-f", "lavfi", "-i", "sine=f=1000:r=48000:d=8,volume=volume='if(lt(mod(t,2),0.1),1,0)':eval=frame",
                           "-c:v", "libx264", "-preset", "veryfast", "-g", "30", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", path])
        return path
    }

    /// Runs ffmpeg as the phone (its own status).
    @discardableResult
    static func publish(_ args: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-nostdin"] + args
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }

    private func startRun(_ dir: String, source: String) throws -> BackgroundRun {
        CLI.write(Self.pipe(source: source), to: dir + "/ingest.pipe")
        let run = try BackgroundRun(["run", dir + "/ingest.pipe", "--events", "json"])
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, "no listening event: \(run.stderr)")
        return run
    }

    func testRtmpPublisherIsRecordedAs720pForItsLengthWithFlashAndBeepInSync() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir)
        let port = try LoopbackPort.free()
        let run = try startRun(dir, source: "type: rtmp, url: \"rtmp://127.0.0.1:\(port)/live/phone\", listen: true")
        XCTAssertEqual(try Self.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let publisher = run.events.filter { $0["event"] as? String == "publisher" }
        XCTAssertEqual(publisher.compactMap { $0["state"] as? String }, ["connected", "disconnected"])
        XCTAssertTrue((publisher.first?["peer"] as? String ?? "").hasPrefix("127.0.0.1:"), "peer address: \(publisher)")
        XCTAssertFalse(run.events.contains { "\($0)".contains("/live/phone") }, "the stream key is not in the events")
        XCTAssertTrue(run.events.contains { $0["event"] as? String == "idle" })
        try assertRecording(dir + "/out.mp4", seconds: 8, accuracy: 0.6)
        try assertFlashAndBeepInSync(dir + "/out.mp4", count: 4)
    }

    func testSrtCallerIsRecordedAs720pForItsLengthWithFlashAndBeepInSync() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir)
        let port = try LoopbackPort.free()
        let run = try startRun(dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true, passphrase: phone-secret-1234")
        XCTAssertEqual(try Self.publish(["-re", "-i", clip, "-c", "copy", "-f", "mpegts",
                                         "srt://127.0.0.1:\(port)?mode=caller&passphrase=phone-secret-1234"]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected"])
        XCTAssertFalse(run.events.contains { "\($0)".contains("phone-secret") }, "the passphrase is not in the events")
        try assertRecording(dir + "/out.mp4", seconds: 8, accuracy: 0.6)
        try assertFlashAndBeepInSync(dir + "/out.mp4", count: 4)
    }

    func testRtmpPublisherThatDropsAt4sAndComesBack2sLaterGivesOneRecording() throws {
        let dir = CLI.scratch()
        let clip = try Self.clip(dir)
        let port = try LoopbackPort.free()
        let url = "rtmp://127.0.0.1:\(port)/live/phone"
        let run = try startRun(dir, source: "type: rtmp, url: \"\(url)\", listen: true")
        XCTAssertEqual(try Self.publish(["-re", "-t", "4", "-i", clip, "-c", "copy", "-f", "flv", url]), 0)
        // ffmpeg takes a moment to start and connect: the second publish reaches avgraph about 2 s after the drop.
        usleep(1_600_000)
        XCTAssertEqual(try Self.publish(["-re", "-ss", "4", "-i", clip, "-c", "copy", "-f", "flv", url]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected", "connected", "disconnected"])
        let times = try assertRecording(dir + "/out.mp4", seconds: 9, accuracy: 1.5)  // 7.5 to 10.5 s
        XCTAssertTrue(zip(times, times.dropFirst()).allSatisfy { $1 > $0 }, "video timestamps only go forward")
        // The gap is in the timeline, held by the last picture before it; audio goes on through it (silence).
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }
        XCTAssertEqual(steps.max() ?? 0, 2, accuracy: 0.8, "the longest hold between two pictures is the gap")
        let audio = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "packet=pts_time", "-of", "csv=p=0",
                                   dir + "/out.mp4"]).split(separator: "\n").compactMap { Double($0.split(separator: ",").first ?? "") }
        XCTAssertGreaterThan(audio.count, 300)
        let audioSteps = zip(audio, audio.dropFirst()).map { $1 - $0 }
        XCTAssertTrue(audioSteps.allSatisfy { $0 > 0 && $0 < 0.03 }, "audio goes only forward, without a hole: \(audioSteps.max() ?? 0)")
        let level = try CLI.samples(dir + "/out.mp4", rate: 48000)
        XCTAssertEqual(Double(level.count) / 48000, (audio.last ?? 0) - (audio.first ?? 0), accuracy: 0.1, "the audio is one piece")
    }

    /// A landscape picture whose H.264 stream says "turn me 90°" (display orientation SEI, as
    /// some phone encoders send; FLV has no rotation field) comes out upright: portrait, so
    /// fitted into 1280x720 with bars at the sides.
    func testDisplayOrientationInTheStreamTurnsThePictureUpright() throws {
        let dir = CLI.scratch()
        let clip = dir + "/turned.mp4"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=s=640x360:r=30:d=4", "-f", "lavfi", "-i", "sine=d=4",
                           "-c:v", "libx264", "-g", "30", "-pix_fmt", "yuv420p", "-bsf:v", "h264_metadata=display_orientation=insert:rotate=90",
                           "-c:a", "aac", clip])
        let port = try LoopbackPort.free()
        let url = "rtmp://127.0.0.1:\(port)/live/phone"
        let run = try startRun(dir, source: "type: rtmp, url: \"\(url)\", listen: true")
        XCTAssertEqual(try Self.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", url]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let frames = try CLI.grayFrames(dir + "/out.mp4", width: 64, height: 36)
        XCTAssertGreaterThan(frames.count, 60)
        for f in frames.suffix(10) {
            func mean(_ xs: Range<Int>) -> Int { (0..<36).reduce(0) { s, y in s + xs.reduce(0) { $0 + Int(f[y * 64 + $1]) } } / (36 * xs.count) }
            XCTAssertLessThan(mean(0..<16), 25, "bars at the left: the picture stands upright")
            XCTAssertLessThan(mean(48..<64), 25, "bars at the right")
            XCTAssertGreaterThan(mean(26..<38), 40, "the picture in the middle")
        }
    }

    /// 1280x720 H.264 + AAC, `seconds` of video (first to last frame, plus one); the frame times.
    @discardableResult
    private func assertRecording(_ path: String, seconds: Double, accuracy: Double, file: StaticString = #filePath, line: UInt = #line) throws -> [Double] {
        let probe = try CLI.probe(path)
        let v = try XCTUnwrap(CLI.stream(probe, "video"), "no video in \(path)", file: file, line: line)
        XCTAssertEqual(v["codec_name"] as? String, "h264", file: file, line: line)
        XCTAssertEqual(v["width"] as? Int, 1280, file: file, line: line)
        XCTAssertEqual(v["height"] as? Int, 720, file: file, line: line)
        XCTAssertEqual(CLI.stream(probe, "audio")?["codec_name"] as? String, "aac", file: file, line: line)
        let times = try CLI.videoFrameTimes(path)
        let length = (times.last ?? 0) - (times.first ?? 0) + 1.0 / 30
        XCTAssertEqual(length, seconds, accuracy: accuracy, "seconds of video recorded", file: file, line: line)
        return times
    }

    /// When each white flash starts (the first bright frame) and the frame before it, seconds on
    /// the file's timeline.
    private func flashTimes(_ path: String) throws -> [(onset: Double, before: Double?)] {
        let times = try CLI.videoFrameTimes(path)
        // Every decoded picture once, in order (no rate conversion), to pair with its time.
        let data = try CLI.capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                                    "-f", "rawvideo", "-pix_fmt", "gray", "-s", "64x36", "-"])
        let frames = stride(from: 0, to: data.count - 64 * 36 + 1, by: 64 * 36).map { Array(data[$0..<$0 + 64 * 36]) }
        XCTAssertEqual(frames.count, times.count, "one picture per frame time")
        // The portrait picture fills the middle third of the 1280x720 frame: judge its centre.
        let levels = frames.map { f in (0..<36).reduce(0) { s, y in s + (28..<36).reduce(0) { $0 + Int(f[y * 64 + $1]) } } / (36 * 8) }
        return levels.indices.filter { $0 < times.count && levels[$0] > 128 && ($0 == 0 || levels[$0 - 1] <= 128) }
            .map { (times[$0], $0 > 0 ? times[$0 - 1] : nil) }
    }

    /// Flash onsets and beep onsets pair up within one frame (1/30 s).
    private func assertFlashAndBeepInSync(_ path: String, count: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let flashes = try flashTimes(path)
        let audioStart = Double(CLI.stream(try CLI.probe(path), "audio")?["start_time"] as? String ?? "0") ?? 0
        let samples = try CLI.samples(path, rate: 48000)
        var beeps: [Double] = []
        var loud = false
        for i in stride(from: 0, to: samples.count - 48, by: 48) {
            let now = samples[i..<i + 48].contains { abs($0) > 0.05 }
            if now && !loud { beeps.append(audioStart + Double(i) / 48000) }
            loud = now
        }
        XCTAssertEqual(flashes.count, count, "flashes at \(flashes)", file: file, line: line)
        XCTAssertEqual(beeps.count, count, "beeps at \(beeps)", file: file, line: line)
        let frame = 1.0 / 30
        for (f, b) in zip(flashes, beeps) {
            // A realtime run on a loaded machine may drop a picture: a flash that follows a hole
            // may have begun anywhere in it.
            let earliest = f.before.map { f.onset - $0 > 1.5 * frame ? $0 : f.onset } ?? f.onset
            XCTAssertTrue(b >= earliest - frame && b <= f.onset + frame,
                          "flash at \(f.onset) s (frame before at \(f.before ?? -1)), beep at \(b) s", file: file, line: line)
        }
    }
}
