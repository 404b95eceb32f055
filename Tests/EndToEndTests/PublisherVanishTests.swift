import AVGraphTesting
import Foundation
import XCTest

/// A network publisher that goes silent (killed without a close, stalled with its connection
/// open, or ending its stream) is recorded up to its last media: video and audio end within a
/// frame of each other there, and the seconds until the source's "sent nothing" verdict are
/// padded into neither track. One that comes back within `idle` has the gap held in both tracks,
/// its flashes on their beeps.
final class PublisherVanishTests: XCTestCase {
    /// A listening source recorded as pipelines/ingest.pipe records: `fps` and `mixer` (which
    /// pad a live gap) between the source and the encoders.
    static func pipe(source: String, idle: String) -> String {
        """
        pipeline: vanish
        realtime: true
        nodes:
          src:     {\(source), idle: \(idle), size: 720x1280}
          upright: {type: orient, in: src.video}
          fit:     {type: resize, in: upright, size: 1280x720, mode: fit}
          smooth:  {type: fps, in: fit, rate: 30}
          mix:     {type: mixer, in: [src.audio], rate: 48000}
          video:   {type: h264, in: smooth, bitrate: 2500k, preset: ultrafast, queue: {size: 60}}
          audio:   {type: aac, in: mix, bitrate: 128k}
          out:     {type: file, in: [video, audio], path: out.mp4, overwrite: true}
        """
    }

    static func start(_ test: XCTestCase, _ dir: String, source: String, idle: String = "4s") throws -> BackgroundRun {
        CLI.write(pipe(source: source, idle: idle), to: dir + "/vanish.pipe")
        let run = try BackgroundRun(["run", dir + "/vanish.pipe", "--events", "json"], cwd: dir)
        test.addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, "no listening event: \(run.stderr)")
        return run
    }

    /// A publisher started and left running (its own status is read by the caller).
    static func spawn(_ tool: String, _ args: [String], input: Pipe? = nil, output: Pipe? = nil) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [tool] + args
        if let input { p.standardInput = input } else { p.standardInput = FileHandle.nullDevice }
        p.standardOutput = output ?? FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Waits for the `n`th publisher connection.
    static func waitForPublisher(_ run: BackgroundRun, _ n: Int = 1) {
        let end = Date().addingTimeInterval(20)
        while Date() < end, run.events.filter({ $0["event"] as? String == "publisher" && $0["state"] as? String == "connected" }).count < n {
            usleep(10_000)
        }
    }

    /// Where each track ends on the recording's timeline (its start plus its duration): ffprobe's
    /// `duration` alone is a track's span from its own first frame, and a publisher's first
    /// picture lands on the frame grid up to a frame after its first sound.
    static func ends(_ path: String) throws -> (video: Double, audio: Double) {
        func end(_ stream: String) throws -> Double {
            let s = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "\(stream):0", "-show_entries", "stream=start_time,duration",
                                   "-of", "csv=p=0", path])
            let fields = s.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").compactMap { Double($0) }
            return fields.count == 2 ? fields[0] + fields[1] : -1
        }
        return (try end("v"), try end("a"))
    }

    /// Both tracks end at the last media (`seconds`), within a frame of each other; prints where.
    static func assertEndsAtLastMedia(_ path: String, _ seconds: Double, _ what: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let d = try ends(path)
        print("\(what): video ends at \(String(format: "%.3f", d.video)) s, audio at \(String(format: "%.3f", d.audio)) s, "
              + "|video - audio| \(String(format: "%.3f", abs(d.video - d.audio))) s")
        XCTAssertEqual(d.video, seconds, accuracy: 0.2, "\(what): video ends at the last media", file: file, line: line)
        XCTAssertEqual(d.audio, seconds, accuracy: 0.2, "\(what): audio ends at the last media", file: file, line: line)
        XCTAssertEqual(d.video, d.audio, accuracy: 0.04, "\(what): video and audio end together", file: file, line: line)
    }

    /// Everything the run said: its warnings (events) and its stderr.
    static func said(_ run: BackgroundRun) -> String {
        run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }.joined(separator: "\n") + run.stderr
    }

    /// An SRT phone that loses its network after 6 s of media: nothing closes, the source only
    /// knows from the silence (its `timeout`, 5 s), and the run ends `idle` (4 s) after that.
    /// ffmpeg is killed (SIGKILL) 5.5 s after the source says it connected: the source says so
    /// once it has probed the stream, about 0.5 s of media after the first.
    func testSrtPublisherKilledAt6sEndsBothTracksAtItsLastMedia() throws {
        let dir = CLI.scratch()
        let clip = dir + "/clip.mp4"
        try FlashBeep.makeClip(clip, seconds: 10)
        let port = try LoopbackPort.free()
        let run = try Self.start(self, dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true")
        let phone = try Self.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-i", clip, "-c", "copy", "-f", "mpegts",
                                              "srt://127.0.0.1:\(port)?mode=caller"])
        defer { if phone.isRunning { kill(phone.processIdentifier, SIGKILL) } }
        Self.waitForPublisher(run)
        usleep(5_500_000)
        kill(phone.processIdentifier, SIGKILL)
        phone.waitUntilExit()
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        try Self.assertEndsAtLastMedia(dir + "/out.mp4", 6, "SRT publisher killed at 6 s")
    }

    /// An RTMP phone whose app freezes at 6 s (SIGSTOP: the TCP connection stays open, nothing
    /// comes), then dies 3 s later.
    func testRtmpPublisherStalledAt6sThenKilledEndsBothTracksAtItsLastMedia() throws {
        let dir = CLI.scratch()
        let clip = dir + "/clip.mp4"
        try FlashBeep.makeClip(clip, seconds: 10)
        let port = try LoopbackPort.free()
        let url = "rtmp://127.0.0.1:\(port)/live/phone"
        let run = try Self.start(self, dir, source: "type: rtmp, url: \"\(url)\", listen: true")
        let phone = try Self.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-i", clip, "-c", "copy", "-f", "flv", url])
        defer { if phone.isRunning { kill(phone.processIdentifier, SIGKILL) } }
        Self.waitForPublisher(run)
        usleep(6_000_000)
        kill(phone.processIdentifier, SIGSTOP)
        usleep(3_000_000)
        kill(phone.processIdentifier, SIGKILL)
        phone.waitUntilExit()
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        try Self.assertEndsAtLastMedia(dir + "/out.mp4", 6, "RTMP publisher stalled at 6 s, killed at 9 s")
    }

    /// libsrt's own tool publishing 6 s (its 1456-byte messages, not a multiple of a TS packet)
    /// and stopped once its input ends (it does not end by itself: SIGINT, exit 0): the recording
    /// is the 6 s, decoded without a corrupt packet.
    func testSrtLiveTransmitPublishing6sIsRecordedWholeAndEndsAtItsLastMedia() throws {
        let dir = CLI.scratch()
        let clip = dir + "/clip.mp4"
        try FlashBeep.makeClip(clip, seconds: 10)
        let port = try LoopbackPort.free()
        let run = try Self.start(self, dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true", idle: "3s")
        let status = try Self.publishWithSrtLiveTransmit(clip, seconds: 6, to: "srt://127.0.0.1:\(port)")
        XCTAssertEqual(status, 0, "srt-live-transmit's exit status")
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        for damage in ["PES packet size mismatch", "Packet corrupt", "corrupt"] {
            XCTAssertFalse(Self.said(run).contains(damage), "decoded without '\(damage)': \(Self.said(run))")
        }
        try Self.assertEndsAtLastMedia(dir + "/out.mp4", 6, "srt-live-transmit publishing 6 s")
        FlashBeep.assertInSync(try FlashBeep.measure(dir + "/out.mp4"), atLeast: 5)
    }

    /// `ffmpeg -re` paces `seconds` of `clip` as MPEG-TS into srt-live-transmit's stdin; once that
    /// ends, srt-live-transmit is asked to stop (SIGINT: it closes its connection). Its status.
    static func publishWithSrtLiveTransmit(_ clip: String, seconds: Int, to url: String) throws -> Int32 {
        let pipe = Pipe()
        let feeder = try spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-i", clip, "-t", "\(seconds)", "-c", "copy", "-f", "mpegts", "-"],
                               output: pipe)
        let sender = try spawn("srt-live-transmit", ["-q", "-a:no", "file://con", url], input: pipe)
        defer {
            for p in [feeder, sender] where p.isRunning { kill(p.processIdentifier, SIGKILL) }
        }
        feeder.waitUntilExit()
        // What it read last is sent within its latency.
        usleep(500_000)
        kill(sender.processIdentifier, SIGINT)
        sender.waitUntilExit()
        return sender.terminationStatus
    }

    /// An SRT phone that loses its network after about 4 s of media and calls again (from where
    /// its media went on) about 2 s later, within `idle`: the gap is held in both tracks, and its first flash after the
    /// return is on its beep.
    func testSrtPublisherThatComesBackWithinIdleHasTheGapHeldInBothTracks() throws {
        let dir = CLI.scratch()
        let clip = dir + "/clip.mp4"
        try FlashBeep.makeClip(clip, seconds: 10)
        let port = try LoopbackPort.free()
        let run = try Self.start(self, dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true, timeout: 1s", idle: "3s")
        let url = "srt://127.0.0.1:\(port)?mode=caller"
        let first = try Self.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-i", clip, "-c", "copy", "-f", "mpegts", url])
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        Self.waitForPublisher(run)
        usleep(3_500_000)
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        // Called again once the listener has taken the first as gone (its 1 s timeout).
        XCTAssertNotNil(run.waitFor(timeout: 10) { $0["event"] as? String == "publisher" && $0["state"] as? String == "disconnected" })
        usleep(500_000)
        let second = try Self.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-ss", "5", "-i", clip, "-t", "3", "-c", "copy", "-f", "mpegts", url])
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        second.waitUntilExit()
        XCTAssertEqual(second.terminationStatus, 0)
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        let path = dir + "/out.mp4"
        let d = try Self.ends(path)
        print("SRT publisher back after its gap: video ends at \(String(format: "%.3f", d.video)) s, audio at \(String(format: "%.3f", d.audio)) s")
        XCTAssertEqual(d.video, d.audio, accuracy: 0.04, "the gap is held in both tracks")
        XCTAssertGreaterThan(d.video, 8, "4 s, the gap, 3 s")
        let m = try FlashBeep.measure(path)
        // The gap is the longest stretch without a flash; the first flash after it is the return's.
        let steps = zip(m.flashes, m.flashes.dropFirst()).map { ($1 - $0, $1) }
        let back = try XCTUnwrap(steps.max { $0.0 < $1.0 }?.1, "flashes: \(m.flashes)")
        let beep = try XCTUnwrap(m.beeps.min { abs($0 - back) < abs($1 - back) }, "no beep at all")
        let offset = back - beep
        print("first flash after the return at \(back) s: flash - beep \(Int((offset * 1000).rounded())) ms")
        XCTAssertLessThanOrEqual(abs(offset), 0.005, "the first flash after the return is on its beep")
        FlashBeep.assertInSync(m, atLeast: 6)
    }
}
