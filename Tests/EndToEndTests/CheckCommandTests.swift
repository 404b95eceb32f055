import Foundation
import XCTest

final class CheckCommandTests: XCTestCase {
    func testShippedPipelinesCheckClean() throws {
        let pipes = try FileManager.default.contentsOfDirectory(atPath: CLI.packageRoot + "/pipelines").filter { $0.hasSuffix(".pipe") }
        let r = try CLI.run(["check"] + pipes.map { "pipelines/" + $0 }, cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
    }

    func testExitCodesAndGCCStyleOutput() throws {
        let dir = CLI.scratch()
        CLI.write("""
        nodes:
          screen: {type: testsrc, size: 320x240, duration: 1s}
          video:  {type: h264, in: screen, bitrat: 2500k}
          out:    {type: null, in: [video]}
        """, to: dir + "/bad.pipe")
        let bad = try CLI.run(["check", dir + "/bad.pipe"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stdout.contains("bad.pipe:3:36: error: unknown option 'bitrat'"), bad.stdout)
        XCTAssertTrue(bad.stdout.contains("note: did you mean 'bitrate'?"), bad.stdout)

        let usage = try CLI.run(["check"])
        XCTAssertEqual(usage.status, 2)
        let unknownFlag = try CLI.run(["check", "--frobnicate", dir + "/bad.pipe"])
        XCTAssertEqual(unknownFlag.status, 2)
    }

    func testJSONFormat() throws {
        let dir = CLI.scratch()
        CLI.write("nodes:\n  screen: {type: testsrc, size: 320by240}\n  out: {type: null, in: [screen]}\n", to: dir + "/bad.pipe")
        let r = try CLI.run(["check", "--format", "json", dir + "/bad.pipe"])
        XCTAssertEqual(r.status, 1)
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let files = json?["files"] as? [[String: Any]]
        let d = (files?.first?["diagnostics"] as? [[String: Any]])?.first
        XCTAssertEqual(d?["line"] as? Int, 2)
        XCTAssertEqual(d?["column"] as? Int, 33)
        XCTAssertEqual(d?["severity"] as? String, "error")
    }

    func testSetOverridesAreCheckedToo() throws {
        let r = try CLI.run(["check", "--set", "video.bitrate=fast", "pipelines/live.pipe"], cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdout.contains("'fast' is not a valid bitrate"), r.stdout)
        let unknown = try CLI.run(["check", "--set", "vidoe.bitrate=1M", "pipelines/live.pipe"], cwd: CLI.packageRoot)
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stdout.contains("did you mean 'video'?"), unknown.stdout)
    }

    func testInspectListsEveryV1TypeAndDescribesH264() throws {
        let list = try CLI.run(["inspect"])
        XCTAssertEqual(list.status, 0)
        for t in ["testsrc", "tone", "file", "rawvideo", "rawaudio", "orient", "resize", "privacy", "fps", "mixer",
                  "resample", "meter", "h264", "aac", "null"] {
            XCTAssertTrue(list.stdout.split(separator: "\n").contains { $0.hasPrefix(t + " ") }, "inspect lacks \(t)")
        }
        let h264 = try CLI.run(["inspect", "h264"])
        XCTAssertEqual(h264.status, 0)
        for option in ["bitrate", "maxrate", "bufsize", "gop", "bframes", "profile", "preset", "tune", "crf", "threads", "lookahead"] {
            XCTAssertTrue(h264.stdout.contains("  \(option)  ["), "inspect h264 lacks option \(option):\n\(h264.stdout)")
        }
        XCTAssertTrue(h264.stdout.contains("default: 2500k"), h264.stdout)
        XCTAssertTrue(h264.stdout.contains("range:"), h264.stdout)
        XCTAssertTrue(h264.stdout.contains("Inputs:") && h264.stdout.contains("raw video"), h264.stdout)
        XCTAssertTrue(h264.stdout.contains("Outputs:") && h264.stdout.contains("encoded video"), h264.stdout)
        let unknown = try CLI.run(["inspect", "h2640"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("did you mean 'h264'?"), unknown.stderr)
    }
}
