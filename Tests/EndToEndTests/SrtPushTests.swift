import AVGraphTesting
import Foundation
import XCTest

/// The `srt` sink against a real SRT listener: ffmpeg on loopback (`mode=listener`), copying what
/// it receives into a .ts that is then decoded.
final class SrtPushTests: XCTestCase {
    /// A small synthetic broadcast pushed over SRT; `extra` lines go under `nodes:`' header.
    static func pipe(url: String, seconds: Int) -> String {
        """
        pipeline: srt-push
        realtime: true
        duration: \(seconds)s
        nodes:
          screen: {type: testsrc, size: 640x360, rate: 30}
          app:    {type: tone, freq: 440, rate: 48000, channels: 2}
          video:  {type: h264, in: screen, bitrate: 1000k}
          audio:  {type: aac, in: app}
          live:   {type: srt, in: [video, audio], url: "\(url)", reconnect: {attempts: 20, backoff: 300ms..1s}}
        """
    }

    /// ffmpeg listening for one SRT caller, copying its stream to `path` until the caller hangs up.
    static func listener(port: Int, to path: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-nostdin", "-y", "-analyzeduration", "1000000", "-i", "srt://127.0.0.1:\(port)?mode=listener", "-c", "copy", "-f", "mpegts", path]
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    static func seconds(_ path: String) throws -> (video: Double, audio: Double) {
        func span(_ stream: String) throws -> Double {
            let t = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-of", "csv=p=0", path])
                .split(separator: "\n").compactMap { Double($0.split(separator: ",").first ?? "") }
            guard let lo = t.min(), let hi = t.max() else { return 0 }
            return hi - lo
        }
        return (try span("v:0"), try span("a:0"))
    }

    func testListenerReceives6SecondsOfH264AndAAC() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let received = dir + "/received.ts"
        let server = try Self.listener(port: port, to: received)
        defer { if server.isRunning { server.terminate() } }
        usleep(500_000)
        CLI.write(Self.pipe(url: "srt://127.0.0.1:\(port)", seconds: 6), to: dir + "/push.pipe")
        let r = try CLI.run(["run", dir + "/push.pipe", "--events", "json"], timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        let end = Date().addingTimeInterval(15)
        while server.isRunning && Date() < end { usleep(50_000) }
        XCTAssertFalse(server.isRunning, "the listener saw the caller hang up")
        let probe = try CLI.probe(received)
        XCTAssertEqual(CLI.stream(probe, "video")?["codec_name"] as? String, "h264")
        XCTAssertEqual(CLI.stream(probe, "audio")?["codec_name"] as? String, "aac")
        let s = try Self.seconds(received)
        XCTAssertEqual(s.video, 6, accuracy: 0.5, "seconds of video received")
        XCTAssertEqual(s.audio, 6, accuracy: 0.5, "seconds of audio received")
    }

    /// As with `rtmp`: a listener that is not there yet is retried with backoff, one that dies is
    /// called again once it is back, and the new session starts on a keyframe.
    func testCallsAgainUntilTheListenerIsThereAndAfterItDies() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        CLI.write(Self.pipe(url: "srt://127.0.0.1:\(port)", seconds: 24), to: dir + "/push.pipe")
        let run = try BackgroundRun(["run", dir + "/push.pipe", "--events", "json"])
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "reconnecting" }, "no reconnecting while nobody listens: \(run.stderr)")
        let first = try Self.listener(port: port, to: dir + "/first.ts")
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "reconnected" }, "no reconnected event: \(run.stderr)")
        // ffmpeg opens its output once it has probed the input (about a second): let it write a while.
        usleep(5_000_000)
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "disconnected" && ($0["reason"] != nil) },
                        "the dead listener is noticed: \(run.stderr)")
        let second = try Self.listener(port: port, to: dir + "/second.ts")
        defer { if second.isRunning { second.terminate() } }
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        let end = Date().addingTimeInterval(15)
        while second.isRunning && Date() < end { usleep(50_000) }
        XCTAssertGreaterThan(run.events.filter { $0["event"] as? String == "reconnected" }.count, 1, "called the second listener")
        XCTAssertGreaterThan(try Self.seconds(dir + "/first.ts").video, 1.5, "the first listener got media")
        XCTAssertGreaterThan(try Self.seconds(dir + "/second.ts").video, 3, "the second listener got media")
        XCTAssertEqual(try CLI.pictTypes(dir + "/second.ts").first, "I", "the second session starts on a keyframe")
    }
}
