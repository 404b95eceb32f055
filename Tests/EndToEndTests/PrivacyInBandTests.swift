import Foundation
import XCTest

/// The privacy card switched by the producer in-band (`avgraph feed --privacy`) and by `ctl set
/// --at`: the decoded recording shows the named card on exactly the pictures of the span.
final class PrivacyInBandTests: XCTestCase {
    /// An 18 s portrait screen recording (testsrc, 30 fps) with a tone, made once.
    static let clip: String = {
        let dir = CLI.scratch("privacyclip")
        CLI.write("""
        duration: 18s
        realtime: false
        nodes:
          screen: {type: testsrc, size: 720x1280, rate: 30}
          app:    {type: tone, freq: 440, rate: 48000, channels: 2}
          video:  {type: h264, in: screen, preset: ultrafast, bitrate: 2M}
          audio:  {type: aac, in: app}
          out:    {type: file, in: [video, audio], path: clip.mp4, overwrite: true}
        """, to: dir + "/clip.pipe")
        _ = try? CLI.run(["run", dir + "/clip.pipe"])
        return dir + "/clip.mp4"
    }()

    /// Mean absolute luma difference against a reference picture, sampled.
    static func distance(_ f: [UInt8], _ ref: [UInt8]) -> Double {
        var s = 0
        for i in stride(from: 0, to: min(f.count, ref.count), by: 7) { s += abs(Int(f[i]) - Int(ref[i])) }
        return Double(s) / Double(min(f.count, ref.count) / 7)
    }

    func testFeedPrivacySpanShowsTheNamedCardOnExactlyItsPicturesInPhoneSocketPipe() throws {
        let dir = CLI.scratch()
        let (runtime, env) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let run = try BackgroundRun(["run", CLI.packageRoot + "/pipelines/phone-socket.pipe", "--events", "json",
                                     "--set", "out.path=\(dir)/out.mp4"], environment: env)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let feed = try Tool.run([CLI.binary, "feed", "phone-socket", Self.clip, "--privacy", "10s:5s:typing"],
                                environment: env)
        XCTAssertEqual(feed.status, 0, feed.stderr)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        // Decoded as stored (passthrough): a picture a busy machine dropped leaves a gap, never a repeat
        // that would shift every later picture against its timestamp.
        let frames = try HlsWitness.grayPictures(dir + "/out.mp4", width: 320, height: 180)
        let typing = try XCTUnwrap(CLI.grayFrames(CLI.packageRoot + "/assets/typing.png", width: 320, height: 180).first)
        let other = try XCTUnwrap(CLI.grayFrames(CLI.packageRoot + "/assets/privacy.png", width: 320, height: 180).first)
        XCTAssertEqual(frames.count, times.count)
        XCTAssertGreaterThan(times.count, 500)
        // The span is in the producer's media time (the clip's: its first picture at 0). The
        // recording places the session where it arrived: its first picture may sit a frame after
        // the session's first audio, so the clip's time is the picture's less the first picture's.
        let first = try XCTUnwrap(times.first)
        var covered = 0
        for (i, t) in times.enumerated() {
            let isTyping = Self.distance(frames[i], typing) < 4
            let clipTime = t - first
            XCTAssertFalse(Self.distance(frames[i], other) < 4, "picture at \(t) s shows the default card")
            XCTAssertEqual(isTyping, clipTime >= 10 - 1e-3 && clipTime < 15 - 1e-3, "picture \(i) at \(t) s (clip \(clipTime) s)")
            if isTyping { covered += 1 }
        }
        XCTAssertEqual(covered, 150, "the 5 s span at 30 fps")
    }

    func testCtlSetAtMediaTimeSwitchesOnExactlyThatPicture() throws {
        let dir = CLI.scratch()
        let image = CLI.packageRoot + "/assets/privacy.png"
        CLI.write("""
        pipeline: privat
        realtime: true
        duration: 5s
        control: \(dir)/ctl.sock
        nodes:
          screen:  {type: testsrc, size: 180x390, rate: 30}
          fit:     {type: resize, in: screen, size: 640x360}
          privacy: {type: privacy, in: fit, image: \(image)}
          video:   {type: h264, in: privacy, bitrate: 2500k, tune: zerolatency, queue: {size: 60}}
          out:     {type: file, in: [video], path: out.mp4}
        """, to: dir + "/p.pipe")
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        let on = try CLI.run(["ctl", dir + "/ctl.sock", "set", "privacy.enabled", "true", "--at", "2.5s"])
        XCTAssertEqual(on.status, 0, on.stderr)
        XCTAssertTrue(on.stdout.contains("2.5"), on.stdout)
        let off = try CLI.run(["ctl", dir + "/ctl.sock", "set", "privacy.enabled", "false", "--at", "3.5s"])
        XCTAssertEqual(off.status, 0, off.stderr)
        let bad = try CLI.run(["ctl", dir + "/ctl.sock", "set", "privacy.enabled", "true", "--at", "soon"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        let card = try XCTUnwrap(CLI.grayFrames(image, width: 640, height: 360).first)
        let frames = try HlsWitness.grayPictures(dir + "/out.mp4", width: 640, height: 360)
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertEqual(frames.count, times.count)
        for (i, t) in times.enumerated() {
            XCTAssertEqual(Self.distance(frames[i], card) < 4, t >= 2.5 - 1e-3 && t < 3.5 - 1e-3, "picture \(i) at \(t) s")
        }
    }
}
