import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// The `screen` source against a private Xvfb showing a picture of four coloured quadrants:
/// `avgraph run` records it, and the decoded file must hold those colours where the window is.
final class ScreenCaptureTests: XCTestCase {
    typealias RGB3 = (Int, Int, Int)
    static let red: RGB3 = (255, 0, 0), green: RGB3 = (0, 255, 0), blue: RGB3 = (0, 0, 255), white: RGB3 = (255, 255, 255)
    /// The window: 320x240 at (100, 80) on a 640x480 screen.
    static let window = (x: 100, y: 80, width: 320, height: 240)

    /// A binary PPM of `width`x`height` split in quadrants: top-left, top-right, bottom-left, bottom-right.
    static func writeQuadrants(_ path: String, width: Int, height: Int, _ colors: [RGB3]) {
        var data = Data("P6\n\(width) \(height)\n255\n".utf8)
        for y in 0..<height {
            for x in 0..<width {
                let c = colors[(y < height / 2 ? 0 : 2) + (x < width / 2 ? 0 : 1)]
                data.append(contentsOf: [UInt8(c.0), UInt8(c.1), UInt8(c.2)])
            }
        }
        _ = FileManager.default.createFile(atPath: path, contents: data)
    }

    /// A display showing the quadrant picture, stopped when the test ends (pass or fail).
    func displayWithWindow() throws -> VirtualDisplay {
        let display = try VirtualDisplay(width: 640, height: 480)
        addTeardownBlock { display.stop() }
        let image = CLI.scratch() + "/quadrants.ppm"
        let w = Self.window
        Self.writeQuadrants(image, width: w.width, height: w.height, [Self.red, Self.green, Self.blue, Self.white])
        try display.show(image: image, x: w.x, y: w.y)
        let up = try display.waitFor(rgb: Self.red, atX: w.x + w.width / 4, y: w.y + w.height / 4)
            && display.waitFor(rgb: Self.white, atX: w.x + 3 * w.width / 4, y: w.y + 3 * w.height / 4)
        XCTAssertTrue(up, "the ffplay window never showed on \(display.name)")
        return display
    }

    /// Decoded pictures as packed RGB.
    static func rgbFrames(_ path: String, width: Int, height: Int) throws -> [[UInt8]] {
        // Every stored picture once: rawvideo output is constant-rate by default, so a capture
        // that came a frame late (a busy machine) would read as a repeated picture.
        let data = try CLI.capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                                    "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        let n = width * height * 3
        return stride(from: 0, to: data.count - n + 1, by: n).map { Array(data[$0..<$0 + n]) }
    }

    /// Mean colour of a box of a packed RGB picture.
    static func mean(_ rgb: [UInt8], width: Int, x: Int, y: Int, w: Int, h: Int) -> RGB3 {
        var s = (0, 0, 0)
        for yy in y..<y + h {
            for xx in x..<x + w {
                let i = (yy * width + xx) * 3
                s.0 += Int(rgb[i]); s.1 += Int(rgb[i + 1]); s.2 += Int(rgb[i + 2])
            }
        }
        let n = w * h
        return (s.0 / n, s.1 / n, s.2 / n)
    }

    static func close(_ a: RGB3, _ b: RGB3, _ tolerance: Int = 24) -> Bool {
        abs(a.0 - b.0) <= tolerance && abs(a.1 - b.1) <= tolerance && abs(a.2 - b.2) <= tolerance
    }

    /// Checks the four quadrants of the window, drawn with its top-left corner at (`ox`, `oy`) of the
    /// picture and scaled by `scale`; boxes keep clear of the quadrant edges (chroma blends there).
    func assertQuadrants(_ rgb: [UInt8], width: Int, ox: Int, oy: Int, scale: Double, _ label: String,
                         file: StaticString = #filePath, line: UInt = #line) {
        let qw = Double(Self.window.width / 2) * scale, qh = Double(Self.window.height / 2) * scale
        let expected = [Self.red, Self.green, Self.blue, Self.white]
        for (i, want) in expected.enumerated() {
            let x = ox + Int((Double(i % 2) * qw + qw * 0.2).rounded()), y = oy + Int((Double(i / 2) * qh + qh * 0.2).rounded())
            let got = Self.mean(rgb, width: width, x: x, y: y, w: Int(qw * 0.6), h: Int(qh * 0.6))
            XCTAssertTrue(Self.close(got, want), "\(label): quadrant \(i) at \(x),\(y) is \(got), expected \(want)", file: file, line: line)
        }
    }

    func testCapturesARegionOfTheScreenWithItsContent() throws {
        let display = try displayWithWindow()
        let dir = CLI.scratch()
        let out = dir + "/screen.mp4"
        // The region starts 40 px above and left of the window, so the window lands at (40, 40).
        CLI.write("""
        pipeline: screen-region
        duration: 3s
        nodes:
          grab:  {type: screen, display: "\(display.name)", region: "60,40,400x320", rate: 30}
          video: {type: h264, in: grab, crf: 18}
          out:   {type: file, in: [video], path: screen.mp4}
        """, to: dir + "/screen.pipe")
        let started = Date()
        let r = try CLI.run(["run", "screen.pipe", "--events", "json"], cwd: dir, timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 15, "a 3 s live capture took far longer")
        // A live source makes the run realtime without `realtime: true` in the file.
        XCTAssertTrue(r.stdout.contains("\"realtime\":true"), r.stdout.prefix(400).description)

        let probe = try CLI.probe(out)
        let v = try XCTUnwrap(CLI.stream(probe, "video"))
        XCTAssertEqual(v["width"] as? Int, 400)
        XCTAssertEqual(v["height"] as? Int, 320)
        let times = try CLI.videoFrameTimes(out)
        XCTAssertTrue((80...92).contains(times.count), "expected about 90 frames (30 fps x 3 s), got \(times.count)")
        XCTAssertEqual(times.first ?? -1, 0, accuracy: 0.05, "the first picture is at 0")
        XCTAssertEqual(times.last ?? 0, 2.97, accuracy: 0.15)
        if times.count > 1 {
            let steps = zip(times.dropFirst(), times).map { $0 - $1 }
            XCTAssertTrue(steps.allSatisfy { $0 > 0 }, "timestamps must increase")
            XCTAssertEqual(steps.reduce(0, +) / Double(steps.count), 1.0 / 30, accuracy: 0.004, "capture clock pacing")
        }

        let frames = try Self.rgbFrames(out, width: 400, height: 320)
        XCTAssertEqual(frames.count, times.count)
        for (label, index) in [("first", 0), ("middle", frames.count / 2), ("last", frames.count - 1)] where index >= 0 && index < frames.count {
            assertQuadrants(frames[index], width: 400, ox: 40, oy: 40, scale: 1, "\(label) picture")
            let corner = Self.mean(frames[index], width: 400, x: 0, y: 0, w: 30, h: 30)
            XCTAssertTrue(Self.close(corner, (0, 0, 0)), "\(label) picture: outside the window should be the black root, got \(corner)")
        }
    }

    /// The shipped screen.pipe: the whole screen, fitted to 720p.
    func testShippedScreenPipelineRecordsTheWholeScreenAt720p() throws {
        let display = try displayWithWindow()
        let out = CLI.scratch() + "/screen.mp4"
        let r = try CLI.run(["run", "pipelines/screen.pipe", "--duration", "2s", "--set", "grab.display=\(display.name)",
                             "--set", "out.path=\(out)"], cwd: CLI.packageRoot, timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        let v = try XCTUnwrap(CLI.stream(try CLI.probe(out), "video"))
        XCTAssertEqual(v["width"] as? Int, 1280)
        XCTAssertEqual(v["height"] as? Int, 720)
        let frames = try Self.rgbFrames(out, width: 1280, height: 720)
        XCTAssertTrue((50...62).contains(frames.count), "expected about 60 frames, got \(frames.count)")
        guard let last = frames.last else { return }
        // 640x480 fits 1280x720 as 960x720 at x 160: the window is at (160 + 1.5 x 100, 1.5 x 80).
        assertQuadrants(last, width: 1280, ox: 160 + 150, oy: 120, scale: 1.5, "last picture")
        let bar = Self.mean(last, width: 1280, x: 0, y: 0, w: 140, h: 720)
        XCTAssertTrue(Self.close(bar, (0, 0, 0)), "fit bars should be black, got \(bar)")
    }

    func testRegionOutsideTheScreenIsAClearRuntimeError() throws {
        let display = try VirtualDisplay(width: 640, height: 480)
        addTeardownBlock { display.stop() }
        let dir = CLI.scratch()
        CLI.write("""
        nodes:
          grab: {type: screen, display: "\(display.name)", region: "500,400,320x240"}
          out:  {type: null, in: [grab]}
        """, to: dir + "/outside.pipe")
        let r = try CLI.run(["run", "outside.pipe"], cwd: dir, timeout: 30)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("avgraph: error: grab (screen): "), r.stderr)
        XCTAssertTrue(r.stderr.contains("500,400,320x240") && r.stderr.contains("outside"), r.stderr)
        XCTAssertTrue(r.stderr.contains("'\(display.name)'") && r.stderr.contains("640x480"), r.stderr)
    }

    /// The X server goes away mid-run: the run ends with the node's error (exit 1), and the file
    /// written so far is finalized and plays. SIGINT on a healthy capture ends it cleanly (exit 0).
    func testLostDisplayAndInterruptEndTheRunCleanly() throws {
        let display = try VirtualDisplay(width: 640, height: 480)
        addTeardownBlock { display.stop() }
        let dir = CLI.scratch()
        CLI.write("""
        nodes:
          grab:  {type: screen, display: "\(display.name)", region: "0,0,320x240"}
          video: {type: h264, in: grab}
          out:   {type: file, in: [video], path: out.mp4}
        """, to: dir + "/lost.pipe")

        let interrupted = try CLI.run(["run", "lost.pipe", "--set", "out.path=\(dir)/interrupted.mp4"], cwd: dir, interruptAfter: 2, timeout: 30)
        XCTAssertEqual(interrupted.status, 0, interrupted.stderr)
        XCTAssertGreaterThan(try CLI.videoFrameTimes(dir + "/interrupted.mp4").count, 30)

        DispatchQueue.global().asyncAfter(deadline: .now() + 2) { display.stop() }
        let started = Date()
        let r = try CLI.run(["run", "lost.pipe"], cwd: dir, timeout: 30)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        XCTAssertTrue(r.stderr.contains("avgraph: error: grab (screen): ") && r.stderr.contains("lost X display '\(display.name)'"), r.stderr)
        let frames = try CLI.videoFrameTimes(dir + "/out.mp4").count
        XCTAssertGreaterThan(frames, 30, "what was captured before the display went away is kept")
    }

    /// No X server there: exit 1 at once, naming the node and the display (no Xvfb needed).
    func testUnreachableDisplayIsAClearErrorWithoutHanging() throws {
        let dir = CLI.scratch()
        let name = ":\(VirtualDisplay.unusedDisplayNumber())"
        CLI.write("""
        nodes:
          grab:  {type: screen, display: "\(name)", region: "0,0,320x240"}
          video: {type: h264, in: grab}
          out:   {type: file, in: [video], path: never.mp4}
        """, to: dir + "/nodisplay.pipe")
        let started = Date()
        let r = try CLI.run(["run", "nodisplay.pipe"], cwd: dir, timeout: 30)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "an unreachable display must fail fast")
        XCTAssertTrue(r.stderr.contains("avgraph: error: grab (screen): "), r.stderr)
        XCTAssertTrue(r.stderr.contains("cannot open X display '\(name)'"), r.stderr)
    }

    /// `check` needs no display: region syntax errors point at the value, and a whole screen
    /// (size known only when running) asks for a resize before an encoder.
    func testCheckReportsRegionErrorsAtTheirPlace() throws {
        let dir = CLI.scratch()
        CLI.write("""
        nodes:
          grab:
            type: screen
            region: 10,10,320by240
          out: {type: null, in: [grab]}
        """, to: dir + "/badregion.pipe")
        let r = try CLI.run(["check", "badregion.pipe"], cwd: dir)
        XCTAssertEqual(r.status, 1)
        let text = r.stdout + r.stderr
        XCTAssertTrue(text.contains("badregion.pipe:4:13: error: option 'region' of 'grab': '10,10,320by240' is not a valid x,y,WxH"), text)
        XCTAssertTrue(text.contains("0,0,1280x720"), "the hint shows the form: \(text)")

        CLI.write("""
        nodes:
          grab:  {type: screen}
          video: {type: h264, in: grab}
          out:   {type: null, in: [video]}
        """, to: dir + "/whole.pipe")
        let w = try CLI.run(["check", "whole.pipe"], cwd: dir)
        XCTAssertEqual(w.status, 1)
        let wt = w.stdout + w.stderr
        XCTAssertTrue(wt.contains("whole.pipe:3:27: error:"), wt)
        XCTAssertTrue(wt.contains("put a resize before h264"), wt)

        CLI.write("""
        nodes:
          grab:  {type: screen, display: "localhost0", region: "0,0,1280x720", format: nv12}
          video: {type: h264, in: grab}
          out:   {type: null, in: [video]}
        """, to: dir + "/nocolon.pipe")
        let nocolon = try CLI.run(["check", "nocolon.pipe"], cwd: dir)
        XCTAssertEqual(nocolon.status, 1, "a display name without ':' is refused")
        XCTAssertTrue((nocolon.stdout + nocolon.stderr).contains("not an X display name"), nocolon.stdout + nocolon.stderr)
    }

    func testRegionSyntax() {
        XCTAssertEqual(ScreenRegion.read("0,0,1280x720"), ScreenRegion(x: 0, y: 0, width: 1280, height: 720))
        XCTAssertEqual(ScreenRegion.read("10, 20, 64x48"), ScreenRegion(x: 10, y: 20, width: 64, height: 48))
        for bad in ["", "0,0", "0,0,1280", "-1,0,10x10", "0,0,0x10", "a,0,10x10", "0,0,10x10,5"] {
            XCTAssertNil(ScreenRegion.read(bad), bad)
        }
    }
}
