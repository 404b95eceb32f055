import CFFmpeg
import Foundation
import XCTest

/// Steering a realtime run over its control socket, checked on the decoded output.
final class ControlTests: XCTestCase {
    static let image = CLI.packageRoot + "/assets/privacy.png"

    func pipe(_ dir: String, name: String, duration: String, extra: String = "") -> String {
        let path = dir + "/\(name).pipe"
        CLI.write("""
        pipeline: \(name)
        realtime: true
        duration: \(duration)
        control: \(dir)/ctl/\(name).sock
        nodes:
          screen:  {type: testsrc, size: 180x390, rate: 30}
          app:     {type: tone, freq: 440, rate: 44100, channels: 2}
          mic:     {type: tone, freq: 2000, rate: 48000}
          fit:     {type: resize, in: screen, size: 640x360}
          privacy: {type: privacy, in: fit, image: \(Self.image)}
          mix:     {type: mixer, in: [app, mic], rate: 44100}
          video:   {type: h264, in: privacy, bitrate: 2500k, tune: zerolatency, queue: {size: 60}}
          audio:   {type: aac, in: mix}
          out:     {type: file, in: [video, audio], path: out.mp4}
        \(extra)
        """, to: path)
        return path
    }

    func ctl(_ dir: String, _ name: String, _ args: [String]) throws -> CLI.Result {
        try CLI.run(["ctl", "\(dir)/ctl/\(name).sock"] + args)
    }

    func testPrivacyOnAndOffShowsTheCardExactlyBetweenTheReportedTimes() throws {
        let dir = CLI.scratch()
        let run = try BackgroundRun(["run", pipe(dir, name: "priv", duration: "6s"), "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        usleep(2_000_000)
        XCTAssertEqual(try ctl(dir, "priv", ["set", "privacy.enabled", "true"]).status, 0)
        usleep(2_000_000)
        XCTAssertEqual(try ctl(dir, "priv", ["set", "privacy.enabled", "false"]).status, 0)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let applied = run.events.filter { $0["event"] as? String == "applied" && $0["node"] as? String == "privacy" }
        XCTAssertEqual(applied.count, 2, "\(applied)")
        guard applied.count == 2, let on = applied[0]["media_time"] as? Double, let off = applied[1]["media_time"] as? Double else { return }
        XCTAssertEqual(on, 2, accuracy: 0.7)
        XCTAssertEqual(off, 4, accuracy: 0.7)
        let card = try XCTUnwrap(CLI.grayFrames(Self.image, width: 640, height: 360).first)
        let frames = try CLI.grayFrames(dir + "/out.mp4", width: 640, height: 360)
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertEqual(frames.count, times.count)
        func isCard(_ f: [UInt8]) -> Bool {
            var s = 0
            for i in stride(from: 0, to: f.count, by: 5) { s += abs(Int(f[i]) - Int(card[i])) }
            return Double(s) / Double(f.count / 5) < 4
        }
        for (i, t) in times.enumerated() {
            let expected = t >= on - 1e-3 && t < off - 1e-3
            XCTAssertEqual(isCard(frames[i]), expected, "frame \(i) at \(t)s (on \(on), off \(off))")
        }
    }

    func testMutingTheMicRemovesItsBandFromTheReportedTime() throws {
        let dir = CLI.scratch()
        let run = try BackgroundRun(["run", pipe(dir, name: "mute", duration: "5s"), "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        usleep(2_500_000)
        let r = try ctl(dir, "mute", ["set", "mix.mute", "{mic: true}"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let applied = try XCTUnwrap(run.events.first { $0["event"] as? String == "applied" && $0["node"] as? String == "mix" })
        let t = try XCTUnwrap(applied["media_time"] as? Double)
        let x = try CLI.samples(dir + "/out.mp4")
        let rate = 44100
        func level(_ from: Double, _ f: Double) -> Double {
            let s = Int(from * Double(rate))
            return CLI.component(x[s..<min(x.count, s + rate / 5)], freq: f, rate: rate, startIndex: s).amplitude
        }
        XCTAssertGreaterThan(level(t - 0.4, 2000), 0.1, "mic present before the mute")
        XCTAssertLessThan(level(t + 0.1, 2000), 0.01, "mic gone after the mute")
        XCTAssertGreaterThan(level(t + 0.1, 440), 0.1, "app goes on")
    }

    func testBitrateDropsWithoutRestartingTheEncoder() throws {
        let dir = CLI.scratch()
        let run = try BackgroundRun(["run", pipe(dir, name: "rate", duration: "9s"), "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        usleep(3_000_000)
        XCTAssertEqual(try ctl(dir, "rate", ["set", "video.bitrate", "600k"]).status, 0)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let applied = try XCTUnwrap(run.events.first { $0["event"] as? String == "applied" && $0["node"] as? String == "video" })
        let t = try XCTUnwrap(applied["media_time"] as? Double)
        let packets = try H264Packets(path: dir + "/out.mp4")
        let window = packets.sizes.filter { $0.time >= t + 0.5 && $0.time < t + 5.5 }
        let kbps = Double(window.reduce(0) { $0 + $1.bytes }) * 8 / 5 / 1000
        XCTAssertEqual(kbps, 600, accuracy: 150, "bitrate after the change")
        XCTAssertEqual(packets.inBandSPS + packets.extradataSPS, 1, "one SPS: one continuous stream")
    }

    func testPauseCutsThePausedSpanAndKeepsSync() throws {
        let dir = CLI.scratch()
        let run = try BackgroundRun(["run", pipe(dir, name: "pause", duration: "60s"), "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        let start = Date()
        usleep(2_000_000)
        XCTAssertEqual(try ctl(dir, "pause", ["pause"]).status, 0)
        let pausedAt = Date()
        usleep(2_000_000)
        XCTAssertEqual(try ctl(dir, "pause", ["resume"]).status, 0)
        let paused = Date().timeIntervalSince(pausedAt)
        usleep(2_000_000)
        XCTAssertEqual(try ctl(dir, "pause", ["stop"]).status, 0)
        let wall = Date().timeIntervalSince(start)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let probe = try CLI.probe(dir + "/out.mp4")
        let v = try XCTUnwrap(CLI.stream(probe, "video")), a = try XCTUnwrap(CLI.stream(probe, "audio"))
        let vd = Double(v["duration"] as? String ?? "") ?? 0, ad = Double(a["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(vd, wall - paused, accuracy: 0.35, "video: wall \(wall) paused \(paused)")
        XCTAssertEqual(vd, ad, accuracy: 1.0 / 30 + 0.03, "A/V in sync")
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        let gaps = zip(times, times.dropFirst()).map { $1 - $0 }
        XCTAssertLessThan(gaps.max() ?? 1, 0.1, "no gap where the pause was")
    }

    func testBadRequestsGetErrorsAndTheRunGoesOn() throws {
        let dir = CLI.scratch()
        let run = try BackgroundRun(["run", pipe(dir, name: "fuzz", duration: "8s"), "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        let sock = dir + "/ctl/fuzz.sock"
        var st = stat()
        XCTAssertEqual(stat(sock, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600, "socket mode")
        XCTAssertEqual(stat(dir + "/ctl", &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o700, "folder mode")
        let c = try ControlClient(path: sock)
        for bad in ["{not json", "{\"cmd\":\"set\",\"node\":\"nope\",\"option\":\"enabled\",\"value\":true}",
                    "{\"cmd\":\"set\",\"node\":\"privacy\",\"option\":\"nope\",\"value\":true}",
                    "{\"cmd\":\"set\",\"node\":\"privacy\",\"option\":\"enabled\",\"value\":\"sometimes\"}",
                    "{\"cmd\":\"set\",\"node\":\"fit\",\"option\":\"size\",\"value\":\"320x240\"}",
                    "[1,2,3]", "{\"cmd\":\"explode\"}"] {
            let reply = c.request(bad)
            XCTAssertEqual(reply?["ok"] as? Bool, false, bad)
            XCTAssertFalse((reply?["error"] as? String ?? "").isEmpty, bad)
        }
        var rng = SystemRandomNumberGenerator()
        let noise = try ControlClient(path: sock)
        for _ in 0..<1000 {
            var line = (0..<Int.random(in: 1...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            line.removeAll { $0 == 10 }
            noise.send(raw: line + [10])
        }
        XCTAssertEqual(c.request("{\"cmd\":\"stats\",\"id\":7}")?["id"] as? Int, 7, "still answering")
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let probe = try CLI.probe(dir + "/out.mp4", ["-count_frames"])
        let frames = Int(CLI.stream(probe, "video")?["nb_read_frames"] as? String ?? "") ?? 0
        XCTAssertEqual(frames, 240, accuracy: 3, "the output is undisturbed")
    }

    func testClipSaveWritesTheLastWindowWhileTheRunGoesOn() throws {
        let dir = CLI.scratch()
        let path = pipe(dir, name: "clip", duration: "20s", extra: "  keep:    {type: clips, in: [video, audio], window: 15s}")
        let run = try BackgroundRun(["run", path, "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        usleep(17_000_000)
        let r = try ctl(dir, "clip", ["clip", "save", dir + "/clip.mp4"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let probe = try CLI.probe(dir + "/clip.mp4")
        let d = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(d, 15, accuracy: 2.1, "15 s plus at most one GOP")
        XCTAssertEqual(try CLI.pictTypes(dir + "/clip.mp4").first, "I", "starts on a keyframe")
        XCTAssertNotNil(CLI.stream(probe, "audio"))
        let main = try CLI.probe(dir + "/out.mp4", ["-count_frames"])
        let frames = Int(CLI.stream(main, "video")?["nb_read_frames"] as? String ?? "") ?? 0
        XCTAssertEqual(frames, 600, accuracy: 3, "no drops in the main output")
        let dropped = run.events.last { $0["event"] as? String == "stats" }?["dropped"] as? Int
        XCTAssertEqual(dropped ?? 0, 0)
    }

    func testAnotherUserCannotConnect() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to act as a second user; modes are checked in testBadRequests") }
        let dir = CLI.scratch()
        chmod(dir, 0o755)
        let run = try BackgroundRun(["run", pipe(dir, name: "other", duration: "3s"), "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        let r = try CLI.shell(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CLI.binary, "ctl", dir + "/ctl/other.sock", "stats"])
        XCTAssertFalse(r.contains("\"ok\":true"), "another user got an answer: \(r)")
        _ = run.waitForExit()
    }
}

/// H.264 packets of an MP4, read with libavformat: sizes by time and where SPS NAL units are.
struct H264Packets {
    var sizes: [(time: Double, bytes: Int)] = []
    var inBandSPS = 0
    var extradataSPS = 0

    init(path: String) throws {
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_open_input(&ctx, path, nil, nil) >= 0, let fmt = ctx else { throw NSError(domain: "open", code: 1) }
        defer { avformat_close_input(&ctx) }
        avformat_find_stream_info(fmt, nil)
        let index = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        let stream = fmt.pointee.streams[Int(index)]!
        let par = stream.pointee.codecpar!
        // avcC: byte 5 & 0x1f = number of SPS.
        if par.pointee.extradata_size > 6, let e = par.pointee.extradata { extradataSPS = Int(e[5] & 0x1f) }
        let tb = stream.pointee.time_base
        let pkt = av_packet_alloc()
        defer { var p = pkt; av_packet_free(&p) }
        while av_read_frame(fmt, pkt) >= 0 {
            if pkt!.pointee.stream_index == index {
                sizes.append((Double(pkt!.pointee.pts) * Double(tb.num) / Double(tb.den), Int(pkt!.pointee.size)))
                var off = 0
                let n = Int(pkt!.pointee.size)
                let d = pkt!.pointee.data!
                while off + 4 < n {
                    let len = Int(d[off]) << 24 | Int(d[off + 1]) << 16 | Int(d[off + 2]) << 8 | Int(d[off + 3])
                    if d[off + 4] & 0x1f == 7 { inBandSPS += 1 }
                    off += 4 + len
                }
            }
            av_packet_unref(pkt)
        }
    }
}
