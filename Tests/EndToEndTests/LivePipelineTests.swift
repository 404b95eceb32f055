import Foundation
import XCTest

/// `avgraph run pipelines/live.pipe` gives a file that plays everywhere: checked by decoding it.
final class LivePipelineTests: XCTestCase {
    func testLivePipeWritesTheMP4ThePhoneBroadcastShouldBe() throws {
        let dir = CLI.scratch()
        let out = dir + "/live.mp4"
        let r = try CLI.run(["run", "pipelines/live.pipe", "--set", "out.path=\(out)"], cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stderr)
        let probe = try CLI.probe(out, ["-count_frames"])
        let v = try XCTUnwrap(CLI.stream(probe, "video"))
        XCTAssertEqual(v["codec_name"] as? String, "h264")
        XCTAssertEqual(v["profile"] as? String, "High")
        XCTAssertEqual(v["width"] as? Int, 1280)
        XCTAssertEqual(v["height"] as? Int, 720)
        XCTAssertEqual(v["r_frame_rate"] as? String, "30/1")
        XCTAssertEqual(v["avg_frame_rate"] as? String, "30/1")
        let frames = Int(v["nb_read_frames"] as? String ?? "") ?? 0
        XCTAssertEqual(Double(frames), 1800, accuracy: 1)
        XCTAssertEqual(v["has_b_frames"] as? Int, 0)
        XCTAssertEqual(v["color_space"] as? String, "bt709")
        XCTAssertEqual(v["color_primaries"] as? String, "bt709")
        XCTAssertEqual(v["color_transfer"] as? String, "bt709")
        XCTAssertEqual(v["color_range"] as? String, "tv")
        XCTAssertFalse(try CLI.pictTypes(out).contains("B"), "no B-frames")
        let a = try XCTUnwrap(CLI.stream(probe, "audio"))
        XCTAssertEqual(a["codec_name"] as? String, "aac")
        XCTAssertEqual(a["profile"] as? String, "LC")
        XCTAssertEqual(a["sample_rate"] as? String, "44100")
        XCTAssertEqual(a["channels"] as? Int, 2)
        XCTAssertEqual(Double(v["duration"] as? String ?? "") ?? 0, 60, accuracy: 0.05)
        XCTAssertEqual(Double(a["duration"] as? String ?? "") ?? 0, 60, accuracy: 0.05)
        let boxes = CLI.topLevelBoxes(out)
        let moov = try XCTUnwrap(boxes.firstIndex(of: "moov")), mdat = try XCTUnwrap(boxes.firstIndex(of: "mdat"))
        XCTAssertLessThan(moov, mdat, "faststart: moov before mdat, got \(boxes)")
    }

    /// The testsrc marker sits in the top-left of the upright picture; after `orient` and `resize`
    /// it must be top-left in the frames of both halves, whatever the tag said.
    func testOrientationScheduleKeepsThePictureUpright() throws {
        let dir = CLI.scratch()
        CLI.write("""
        duration: 4s
        nodes:
          screen:  {type: testsrc, size: 360x780, rate: 30, orientation: [{at: 0s, value: up}, {at: 2s, value: left}]}
          upright: {type: orient, in: screen}
          fit:     {type: resize, in: upright, size: 1280x720, mode: fit}
          video:   {type: h264, in: fit, bitrate: 2M}
          out:     {type: file, in: [video], path: out.mp4}
        """, to: dir + "/orient.pipe")
        let r = try CLI.run(["run", dir + "/orient.pipe"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let frames = try CLI.grayFrames(dir + "/out.mp4", width: 1280, height: 720)
        XCTAssertEqual(frames.count, 120)
        // Content rectangles of the fitted upright picture: portrait 360x780, landscape 780x360.
        let portrait = (x: (1280 - 332) / 2, y: 0, w: 332, h: 720)
        let landscapeH = Int((1280.0 * 360 / 780).rounded())
        let landscape = (x: 0, y: (720 - landscapeH) / 2, w: 1280, h: landscapeH)
        for (index, rect) in [(15, portrait), (45, portrait), (75, landscape), (105, landscape)] {
            CLI.assertMarkerTopLeft(frames[index], width: 1280, content: rect, "frame \(index)")
        }
        let probe = try CLI.probe(dir + "/out.mp4")
        XCTAssertEqual(CLI.stream(probe, "video")?["width"] as? Int, 1280)
        XCTAssertEqual(CLI.stream(probe, "video")?["height"] as? Int, 720)
    }

    func testPrivacyScheduleSwapsExactlyTheScheduledFrames() throws {
        let dir = CLI.scratch()
        let image = CLI.packageRoot + "/assets/privacy.png"
        CLI.write("""
        duration: 31s
        nodes:
          screen:  {type: testsrc, size: 180x390, rate: 30}
          fit:     {type: resize, in: screen, size: 1280x720, mode: fit}
          privacy: {type: privacy, in: fit, image: \(image), schedule: [{at: 20s, for: 10s}]}
          video:   {type: h264, in: privacy, bitrate: 3M}
          out:     {type: file, in: [video], path: out.mp4}
        """, to: dir + "/privacy.pipe")
        let r = try CLI.run(["run", dir + "/privacy.pipe"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let card = try XCTUnwrap(CLI.grayFrames(image, width: 1280, height: 720).first)
        let frames = try CLI.grayFrames(dir + "/out.mp4", width: 1280, height: 720)
        XCTAssertEqual(frames.count, 930)
        func mad(_ f: [UInt8]) -> Double {
            var s = 0
            for i in stride(from: 0, to: f.count, by: 7) { s += abs(Int(f[i]) - Int(card[i])) }
            return Double(s) / Double(f.count / 7)
        }
        for i in [600, 601, 700, 899] { XCTAssertLessThan(mad(frames[i]), 4, "frame \(i) should be the privacy card") }
        for i in [0, 598, 599, 900, 901, 929] { XCTAssertGreaterThan(mad(frames[i]), 12, "frame \(i) should not be the card") }
    }

    func testStalledScreenIsCoveredByFpsHoldAndNotWithoutIt() throws {
        for hold in ["2s", "0s"] {
            let dir = CLI.scratch()
            CLI.write("""
            duration: 9s
            nodes:
              screen: {type: testsrc, size: 180x390, rate: 30, stalls: [{at: 5s, for: 2s}]}
              fit:    {type: resize, in: screen, size: 320x240}
              smooth: {type: fps, in: fit, rate: 30, hold: \(hold)}
              video:  {type: h264, in: smooth, bitrate: 500k}
              out:    {type: file, in: [video], path: out.mp4}
            """, to: dir + "/stall.pipe")
            let r = try CLI.run(["run", dir + "/stall.pipe"])
            XCTAssertEqual(r.status, 0, r.stderr)
            let times = try CLI.videoFrameTimes(dir + "/out.mp4")
            let gaps = zip(times, times.dropFirst()).map { $1 - $0 }
            if hold == "2s" {
                XCTAssertEqual(times.count, 270, accuracy: 1)
                XCTAssertLessThan(gaps.max() ?? 1, 0.034, "no gap with hold 2s")
            } else {
                XCTAssertEqual(times.count, 210, accuracy: 1)
                XCTAssertGreaterThan(gaps.max() ?? 0, 1.9, "with hold 0s the stall leaves a gap")
            }
        }
    }
}
