import Foundation
import XCTest

/// Inputs that vanish or are damaged under a running pipeline: a mapped `rawvideo` file
/// truncated or replaced, a `file` source with damaged packets.
final class InputFaultTests: XCTestCase {
    /// 300 frames of 640x360 yuv420p (100 MB) looped into H.264 in an MP4.
    func rawPipe(_ dir: String) throws -> (pipe: String, raw: String, out: String) {
        let raw = dir + "/cam.yuv", out = dir + "/out.mp4"
        try CLI.shell(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-frames", "300",
                       "-pix_fmt", "yuv420p", "-f", "rawvideo", raw])
        CLI.write("""
        nodes:
          cam:   {type: rawvideo, path: cam.yuv, size: 640x360, format: yuv420p, rate: 30, loop: true}
          video: {type: h264, in: cam}
          out:   {type: file, in: [video], path: out.mp4}
        """, to: dir + "/raw.pipe")
        return (dir + "/raw.pipe", raw, out)
    }

    /// Offline, the pictures queued ahead of the encoder are mapped and not yet read when the
    /// file shrinks, so reading them is what used to raise SIGBUS (exit 135). Now: exit 1 naming
    /// the node, and the recording plays.
    func testTruncatedRawvideoStopsWithAnErrorNamingTheNode() throws {
        for size in ["0", "1000000"] {
            let dir = CLI.scratch()
            let (pipe, raw, out) = try rawPipe(dir)
            let run = try BackgroundRun(["run", pipe, "--offline", "--events", "json"])
            XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "stats" && ($0["media_time"] as? Double ?? 0) > 2 })
            try CLI.shell(["truncate", "-s", size, raw])
            let status = run.waitForExit()
            XCTAssertEqual(status, 1, "truncated to \(size): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("cam (rawvideo):") && run.stderr.contains("truncated"), run.stderr)
            XCTAssertEqual(try RecordingSafetyTests.decodeErrors(out), "")
            XCTAssertGreaterThan(try CLI.videoFrameTimes(out).count, 30)
        }
    }

    /// A file moved over the input's path: the run stops naming the node (it would otherwise go
    /// on with the old content while the user meant the new one).
    func testReplacedRawvideoStopsWithAnErrorNamingTheNode() throws {
        let dir = CLI.scratch()
        let (pipe, raw, out) = try rawPipe(dir)
        try FileManager.default.copyItem(atPath: raw, toPath: dir + "/other.yuv")
        let run = try BackgroundRun(["run", pipe, "--realtime", "--events", "json"])
        XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "stats" && ($0["media_time"] as? Double ?? 0) > 1 })
        XCTAssertEqual(rename(dir + "/other.yuv", raw), 0)
        XCTAssertEqual(run.waitForExit(), 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("cam (rawvideo):") && run.stderr.contains("replaced"), run.stderr)
        XCTAssertEqual(try RecordingSafetyTests.decodeErrors(out), "")
    }

    /// Bytes overwritten with noise across a .ts file: the source skips what cannot be read or
    /// decoded, says how many (warning events with a count) and the run ends cleanly with the
    /// whole length recorded.
    func testDamagedPacketsAreSkippedAndCounted() throws {
        let dir = CLI.scratch()
        try CLI.shell(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", "-f", "lavfi",
                       "-i", "sine=frequency=440:sample_rate=44100", "-t", "10", "-c:v", "libx264", "-preset", "veryfast", "-g", "30",
                       "-c:a", "aac", "-f", "mpegts", dir + "/good.ts"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir + "/good.ts")))
        var rng = SplitMix(seed: 7)
        for _ in 0..<40 {
            let at = Int(rng.next() % UInt64(bytes.count - bytes.count / 10 - 1000)) + bytes.count / 10
            for j in 0..<200 { bytes[at + j] = UInt8(truncatingIfNeeded: rng.next()) }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: dir + "/bad.ts"))
        CLI.write("""
        nodes:
          in:    {type: file, path: bad.ts}
          video: {type: h264, in: in.video}
          audio: {type: aac, in: in.audio}
          out:   {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/bad.pipe")
        let r = try CLI.run(["run", dir + "/bad.pipe", "--events", "json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let warnings = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["event"] as? String == "warning" && $0["node"] as? String == "in" }
        // "'.../bad.ts': skipped 12 damaged packets so far": the count is in the message.
        let counted = warnings.compactMap { w -> Int? in
            let words = (w["message"] as? String ?? "").split(separator: " ")
            guard let i = words.firstIndex(of: "damaged"), i > 0 else { return nil }
            return Int(words[i - 1])
        }
        XCTAssertGreaterThan(counted.max() ?? 0, 0, r.stdout)
        XCTAssertEqual(counted, counted.sorted(), "the count only grows")
        XCTAssertEqual(try RecordingSafetyTests.decodeErrors(dir + "/out.mp4"), "")
        let held = try RecordingSafetyTests.decodedSeconds(dir + "/out.mp4")
        XCTAssertEqual(held.video, 10, accuracy: 0.5)
        XCTAssertEqual(held.audio, 10, accuracy: 0.5)
    }
}

/// A small seeded generator: the damage is the same on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E9B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
