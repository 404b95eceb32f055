import Foundation
import XCTest

/// When media starts, how picture and sound line up through the socket path, and how loud the
/// mix may get through AAC: each checked on the decoded recording.
final class TimingTests: XCTestCase {
    static let clip: String = {
        let path = CLI.scratch("flashbeep") + "/flashbeep.mp4"
        try? FlashBeep.makeClip(path, seconds: 40)
        return path
    }()

    /// A phone broadcast recorded from a socket, as pipelines/phone-socket.pipe does (no `hold`).
    func startSocketRun(_ dir: String, extra: String = "") throws -> (BackgroundRun, String) {
        let socket = "/tmp/avg-timing-\(UUID().uuidString.prefix(8)).sock"
        CLI.write("""
        pipeline: timing\(UUID().uuidString.prefix(6).lowercased())
        \(extra)
        nodes:
          phone:   {type: socket, path: \(socket), size: 360x640, idle-warning: 1s, buffer: 16}
          upright: {type: orient, in: phone.video}
          fit:     {type: resize, in: upright, size: 640x360, mode: fit}
          smooth:  {type: fps, in: fit, rate: 30}
          mix:     {type: mixer, in: [phone.app, phone.mic], rate: 48000, gain: {phone.mic: 1.5}}
          video:   {type: h264, in: smooth, bitrate: 2M, preset: ultrafast, queue: {size: 150}}
          audio:   {type: aac, in: mix}
          out:     {type: file, in: [video, audio], path: out.mp4, overwrite: true}
        """, to: dir + "/timing.pipe")
        let run = try BackgroundRun(["run", dir + "/timing.pipe", "--events", "json"], cwd: dir)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, "socket source did not listen: \(run.stderr)")
        return (run, socket)
    }

    /// `avgraph feed SOCKET CLIP ARGS` (a phone's broadcast extension) in the background, with
    /// small screens: what is measured is timing, and a loaded machine must not drop the
    /// one-frame flashes.
    func feed(_ socket: String, _ args: [String]) throws -> BackgroundRun {
        try BackgroundRun(["feed", socket, Self.clip, "--size", "360x640"] + args)
    }

    func testSocketRecordingWhoseProducerConnects2sLateStartsAtItsFirstFrameInSync() throws {
        let dir = CLI.scratch()
        let (run, socket) = try startSocketRun(dir)
        usleep(2_000_000)
        let producer = try feed(socket, ["--duration", "6s"])
        XCTAssertEqual(producer.waitForExit(timeout: 90), 0, producer.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let m = try FlashBeep.measure(dir + "/out.mp4")
        XCTAssertLessThanOrEqual(m.videoTimes.first ?? 9, 0.1, "first video frame")
        XCTAssertLessThanOrEqual(m.audioStart, 0.1, "first audio frame")
        FlashBeep.assertInSync(m, atLeast: 4)
    }

    func testPausedStartRecordsFromTheResume() throws {
        let dir = CLI.scratch()
        let control = "/tmp/avg-timing-ctl-\(UUID().uuidString.prefix(8)).sock"
        let (run, socket) = try startSocketRun(dir, extra: "control: \(control)")
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        XCTAssertEqual(try CLI.run(["ctl", control, "pause"]).status, 0)
        let producer = try feed(socket, ["--duration", "7s"])
        usleep(2_500_000)
        XCTAssertEqual(try CLI.run(["ctl", control, "resume"]).status, 0)
        XCTAssertEqual(producer.waitForExit(timeout: 90), 0, producer.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let m = try FlashBeep.measure(dir + "/out.mp4")
        XCTAssertLessThanOrEqual(m.videoTimes.first ?? 9, 0.1, "first video frame")
        XCTAssertLessThanOrEqual(m.audioStart, 0.1, "first audio frame")
        XCTAssertLessThan(m.videoTimes.last ?? 9, 6.5, "the paused media is not in the recording")
        FlashBeep.assertInSync(m, atLeast: 2)
    }

    func testFlashBeepBroadcastWithStallTurnsLateMicAndDisconnectStaysInSyncWithoutHoles() throws {
        let dir = CLI.scratch()
        let (run, socket) = try startSocketRun(dir)
        let producer = try feed(socket, ["--orientation", "0s:up,8s:left,20s:right,30s:up", "--stall", "10s:3s",
                                 "--mic-delay", "5s", "--disconnect", "24s:2s"])
        XCTAssertEqual(producer.waitForExit(timeout: 90), 0, producer.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        let m = try FlashBeep.measure(dir + "/out.mp4")
        // 40 flashes less 3 in the stall and 2 in the disconnect (a one-frame flash may be
        // dropped on a loaded machine; every one that shows must be on its beep, the run's median
        // within 5 ms).
        FlashBeep.assertRunInSync(m, atLeast: 30, "40 s broadcast")
        let steps = zip(m.videoTimes, m.videoTimes.dropFirst()).map { $1 - $0 }
        XCTAssertLessThan(abs((steps.max() ?? 1) - 1.0 / 30), 0.002, "a hole in the video timeline (stall, disconnect)")
        XCTAssertLessThan(abs((steps.min() ?? 0) - 1.0 / 30), 0.002, "frames closer than 1/30 s")
        XCTAssertEqual(m.videoTimes.last ?? 0, 40, accuracy: 0.5)
        XCTAssertLessThan(m.peak, 1.0, "a clipped sample")
    }

    /// Two -1 dBFS tones at +6 dB each through the mixer, AAC-encoded, decoded by ffmpeg: under
    /// 0.9 and under -1 dBTP (ffmpeg's own true-peak meter), steady and at a hard onset.
    func testLoudMixStaysUnderMinus1dBTPAfterAAC() throws {
        let dir = CLI.scratch()
        for (freqs, start) in [((440, 660), "0s"), ((1000, 1500), "1s"), ((3000, 5000), "0.5s")] {
            CLI.write("""
            duration: 3s
            realtime: false
            nodes:
              a:   {type: tone, freq: \(freqs.0), rate: 48000, channels: 2, level: -1dB}
              b:   {type: tone, freq: \(freqs.1), rate: 48000, channels: 2, level: -1dB, start: \(start)}
              mix: {type: mixer, in: [a, b], gain: {a: 6dB, b: 6dB}}
              enc: {type: aac, in: mix}
              out: {type: file, in: [enc], path: loud.mp4, overwrite: true}
            """, to: dir + "/loud.pipe")
            let r = try CLI.run(["run", dir + "/loud.pipe"])
            XCTAssertEqual(r.status, 0, r.stderr)
            let data = try CLI.capture(["ffmpeg", "-v", "error", "-i", dir + "/loud.mp4", "-f", "f32le", "-"])
            let x: [Float] = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
            XCTAssertGreaterThan(x.count, 2 * 48000 * 2, "\(freqs)")
            let peak = x.map(abs).max() ?? 9
            XCTAssertLessThanOrEqual(peak, 0.9, "decoded peak, tones \(freqs) from \(start)")
            XCTAssertGreaterThan(peak, 0.7, "limited, not crushed")
            let meter = try CLI.shell(["sh", "-c", "ffmpeg -nostats -i '\(dir)/loud.mp4' -af ebur128=peak=true -f null - 2>&1 | grep -A1 'True peak' | tail -1"])
            let tp = meter.split(separator: " ").compactMap { Double($0) }.first ?? 9
            XCTAssertLessThanOrEqual(tp, -1.0, "true peak dBTP, tones \(freqs): \(meter)")
        }
    }
}
