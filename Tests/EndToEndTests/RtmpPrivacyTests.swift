import AVGraphTesting
import Foundation
import XCTest

/// The privacy switch a phone app sends in its RTMP stream (`onPrivacy`, docs/INGEST.md), sent
/// by scripts/rtmp-publish with an ffmpeg-made clip: the recording shows the named card on
/// exactly the pictures from each switch's time on.
final class RtmpPrivacyTests: XCTestCase {
    func testOnPrivacyDataMessagesCoverExactlyTheirPictures() throws {
        let dir = CLI.scratch()
        let flv = dir + "/phone.flv"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=720x1280:r=30:d=6",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=6", "-c:v", "libx264", "-preset", "ultrafast", "-g", "30",
                           "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", flv])
        let port = try LoopbackPort.free()
        let assets = CLI.packageRoot + "/assets"
        CLI.write("""
        pipeline: rtmp-privacy
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          upright: {type: orient, in: src.video}
          fit:     {type: resize, in: upright, size: 640x360, mode: fit}
          privacy: {type: privacy, in: fit, image: \(assets)/privacy.png, cards: {typing: \(assets)/typing.png}}
          video:   {type: h264, in: privacy, preset: ultrafast, queue: {size: 60}}
          out:     {type: file, in: [video], path: out.mp4}
        """, to: dir + "/p.pipe")
        var env = ProcessInfo.processInfo.environment
        env["AVGRAPH_KEYS"] = nil
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json"], cwd: dir, environment: env)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone",
                                    "--privacy", "2s:2s:typing", "--privacy", "4500ms:1s"])
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        try Self.assertSwitchesCoverTheirPictures(dir + "/out.mp4")
    }

    /// The recording of a 6 s, 180-picture publish switched by `--privacy 2s:2s:typing --privacy
    /// 4500ms:1s`: the typing card on exactly pictures 60..119, the image on 135..164, the screen
    /// on the rest (frame k is the publisher's picture k: none dropped, none repeated).
    static func assertSwitchesCoverTheirPictures(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let assets = CLI.packageRoot + "/assets"
        let frames = try HlsWitness.grayPictures(path, width: 320, height: 180)
        let typing = try XCTUnwrap(CLI.grayFrames(assets + "/typing.png", width: 320, height: 180).first)
        let card = try XCTUnwrap(CLI.grayFrames(assets + "/privacy.png", width: 320, height: 180).first)
        XCTAssertGreaterThanOrEqual(frames.count, 175, "the publisher's 180 pictures", file: file, line: line)
        XCTAssertLessThanOrEqual(frames.count, 180, file: file, line: line)
        var shown = ["screen": 0, "typing": 0, "image": 0]
        for (k, f) in frames.enumerated() {
            let t = Double(k) / 30
            let expected = t >= 2 - 1e-3 && t < 4 - 1e-3 ? "typing" : t >= 4.5 - 1e-3 && t < 5.5 - 1e-3 ? "image" : "screen"
            let got = PrivacyInBandTests.distance(f, typing) < 4 ? "typing" : PrivacyInBandTests.distance(f, card) < 4 ? "image" : "screen"
            XCTAssertEqual(got, expected, "picture \(k) (\(t) s on the publisher's clock)", file: file, line: line)
            shown[got, default: 0] += 1
        }
        XCTAssertEqual(shown["typing"], 60, file: file, line: line)
        XCTAssertEqual(shown["image"], 30, file: file, line: line)
    }
}
