import AVGraph
import AVGraphTesting
import CFFmpeg
import Foundation
import XCTest

/// End to end, through the `avgraph` program as a user runs it: plugins load from --plugin,
/// AVGRAPH_PLUGIN_PATH and a .pipe's `plugins:`; the media written shows them at work.
final class PluginTests: XCTestCase {
    static var avgraph: String { Plugins.buildDirectory + "/avgraph" }

    @discardableResult
    func avgraph(_ args: [String], environment: [String: String] = [:], expect status: Int32 = 0,
                 file: StaticString = #filePath, line: UInt = #line) throws -> (out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.avgraph)
        p.arguments = args
        p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let result = (String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
        XCTAssertEqual(p.terminationStatus, status, "avgraph \(args.joined(separator: " ")):\n\(result.0)\n\(result.1)", file: file, line: line)
        return result
    }

    func testInspectListsPluginTypesAndTheirFile() throws {
        let watermark = try Plugins.watermark, ducker = try Plugins.ducker
        let list = try avgraph(["inspect", "--plugin", watermark, "--plugin", ducker]).out
        let line = try XCTUnwrap(list.split(separator: "\n").first { $0.hasPrefix("watermark ") })
        XCTAssertTrue(line.contains("[plugin ") && line.contains("libAVGraphWatermark.so"), String(line))
        XCTAssertTrue(list.contains("ducker "))
        XCTAssertFalse(try XCTUnwrap(list.split(separator: "\n").first { $0.hasPrefix("resize ") }).contains("[plugin"))
        let detail = try avgraph(["inspect", "watermark", "--plugin", watermark]).out
        XCTAssertTrue(detail.contains("from: ") && detail.contains("libAVGraphWatermark.so"), detail)
        XCTAssertTrue(detail.contains("corner") && detail.contains("live"), detail)
        XCTAssertTrue(try avgraph(["inspect", "resize"]).out.contains("from: built-in"))
        let fromEnvironment = try avgraph(["inspect", "ducker"], environment: ["AVGRAPH_PLUGIN_PATH": "/nonexistent-dir-is-skipped-no:\(ducker)"],
                                          expect: 1)
        XCTAssertTrue(fromEnvironment.err.contains("/nonexistent-dir-is-skipped-no") && fromEnvironment.err.contains("not found"), fromEnvironment.err)
        XCTAssertTrue(try avgraph(["inspect", "ducker"], environment: ["AVGRAPH_PLUGIN_PATH": ducker]).out.contains("threshold"))
    }

    func testCheckAndRunTakePluginsFromTheCommandLine() throws {
        let dir = Plugins.scratch()
        let pipe = dir + "/p.pipe"
        try """
        nodes:
          screen: {type: testsrc, size: 64x64, duration: 0.5s}
          mark:   {type: watermark, in: screen, text: HI}
          out:    {type: null, in: mark}
        """.write(toFile: pipe, atomically: true, encoding: .utf8)
        let without = try avgraph(["check", pipe], expect: 1)
        XCTAssertTrue(without.out.contains("unknown node type 'watermark'"), without.out)
        XCTAssertTrue(try avgraph(["check", "--plugin", try Plugins.watermark, pipe]).out.contains("ok (3 nodes)"))
        try avgraph(["run", "--plugin", try Plugins.watermark, pipe])
        try avgraph(["run", pipe], environment: ["AVGRAPH_PLUGIN_PATH": try Plugins.watermark])
    }

    func testABadPluginOnTheCommandLineIsAnErrorNamingIt() throws {
        let r = try avgraph(["inspect", "--plugin", try Plugins.library("FixtureNoEntry")], expect: 1)
        XCTAssertTrue(r.err.contains("libFixtureNoEntry.so") && r.err.contains("not a plugin"), r.err)
    }

    /// A pipeline using both plugins: checked, run, and the written media decoded.
    func testBothPluginsCheckRunAndShowInTheMedia() throws {
        let dir = Plugins.scratch()
        let watermark = try Plugins.watermark, ducker = try Plugins.ducker
        func pipe(opacity: Double, out: String) -> String {
            """
            duration: 6s
            plugins: [\(watermark), \(ducker)]
            nodes:
              screen: {type: testsrc, size: 640x360, rate: 30}
              mark:   {type: watermark, in: screen, image: \(Plugins.packageRoot)/assets/privacy.png, corner: top-right, opacity: \(opacity), margin: 16, scale: 0.25}
              app:    {type: tone, freq: 440, rate: 48000, channels: 2, level: -12dB}
              mic:    {type: tone, freq: 880, rate: 48000, start: 2s, gaps: [{at: 4s, for: 10s}], level: -20dB}
              duck:   {type: ducker, in: {main: app, key: mic}, depth: 12, attack: 20ms, release: 300ms, hold: 100ms}
              mix:    {type: mixer, in: [duck, mic], rate: 48000}
              video:  {type: h264, in: mark, bitrate: 4000k}
              audio:  {type: aac, in: mix, bitrate: 192k}
              out:    {type: file, in: [video, audio], path: \(out), overwrite: true}
            """
        }
        try pipe(opacity: 1, out: "out.mp4").write(toFile: dir + "/plugins.pipe", atomically: true, encoding: .utf8)
        try pipe(opacity: 0, out: "bare.mp4").write(toFile: dir + "/bare.pipe", atomically: true, encoding: .utf8)
        XCTAssertTrue(try avgraph(["check", "--allow-plugins", dir + "/plugins.pipe"]).out.contains("ok (9 nodes)"))
        try avgraph(["run", dir + "/plugins.pipe"])
        try avgraph(["run", dir + "/bare.pipe"])

        // Video: where the marked run differs from the bare one is the mark's rectangle at the top
        // right: 160 wide (0.25 x 640), 90 high (the card is 16:9), 16 px from the top and right edges.
        let marked = try Plugins.decodeGray(dir + "/out.mp4", width: 640, height: 360)
        let bare = try Plugins.decodeGray(dir + "/bare.mp4", width: 640, height: 360)
        XCTAssertEqual(marked.count, 180)
        XCTAssertEqual(bare.count, 180)
        let markX = 640 - 16 - 160, markY = 16
        for i in [0, 90, 179] {
            var box = (x0: 640, y0: 360, x1: -1, y1: -1), changed = 0
            for y in 0..<360 { for x in 0..<640 where abs(Int(marked[i][y * 640 + x]) - Int(bare[i][y * 640 + x])) > 24 {
                box = (min(box.x0, x), min(box.y0, y), max(box.x1, x), max(box.y1, y))
                changed += 1
            } }
            XCTAssertGreaterThan(changed, 500, "frame \(i): the mark shows")
            XCTAssertGreaterThanOrEqual(box.x0, markX - 2, "frame \(i): \(box)")
            XCTAssertGreaterThanOrEqual(box.y0, markY - 2, "frame \(i): \(box)")
            XCTAssertLessThanOrEqual(box.x1, markX + 160 + 1, "frame \(i): \(box)")
            XCTAssertLessThanOrEqual(box.y1, markY + 90 + 1, "frame \(i): \(box)")
            // And what is there is the node's own drawing over the bare picture (the same node in the harness).
            let h = try NodeHarness(try XCTUnwrap(Plugins.registry()["watermark"]),
                                    options: "image: \(Plugins.packageRoot)/assets/privacy.png, corner: top-right, opacity: 1, margin: 16, scale: 0.25",
                                    inputs: [.video(width: 640, height: 360, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
            try h.feed(TestMedia.videoFrame(width: 640, height: 360) { x, y in bare[i][y * 640 + x] })
            let expected = try XCTUnwrap(h.emittedFrames().first)
            var diff = 0
            for y in markY..<(markY + 90) { for x in markX..<(markX + 160) {
                diff += abs(Int(marked[i][y * 640 + x]) - Int(expected.plane(0)![y * expected.lineSize(0) + x]))
            } }
            XCTAssertLessThan(Double(diff) / Double(160 * 90), 4, "frame \(i): mean difference from the drawn mark")
        }

        // Audio: app (440 Hz) lowered by at least 12 dB while the mic (880 Hz) speaks from 2 s to 4 s, back after.
        let samples = try Plugins.decodeAudio(dir + "/out.mp4", rate: 48000)
        func level(_ a: Double, _ b: Double, freq: Double = 440) -> Double {
            20 * log10(Plugins.toneLevel(samples[Int(a * 48000)..<Int(b * 48000)], freq: freq, rate: 48000) / sqrt(2))
        }
        let before = level(0.5, 1.9), during = level(2.3, 3.9), after = level(4.6, 5.8)
        print(String(format: "ducked app level (dBFS RMS of the 440 Hz tone): before %.2f, during %.2f, after %.2f; mic %.2f",
                     before, during, after, level(2.3, 3.9, freq: 880)))
        XCTAssertEqual(before, -12, accuracy: 0.5, "tone's level is RMS")
        XCTAssertLessThanOrEqual(during, before - 12 + 0.3, "before \(before), during \(during)")
        XCTAssertEqual(after, before, accuracy: 0.3, "recovered after hold + release")
        XCTAssertEqual(level(2.3, 3.9, freq: 880), -20, accuracy: 0.5, "the mic itself is not lowered")
    }
}
