import AVGraphTesting
import Foundation
import XCTest

/// `file` with `split` in realtime runs: a kill -9 in the middle of a part, and a phone publishing
/// over RTMP. The parts are judged by decoding them (ffmpeg).
final class FileSplitLiveTests: XCTestCase {
    /// The MD5 of each decoded picture, in order.
    static func pictureHashes(_ path: String) throws -> [String] {
        try CLI.shell(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "framemd5", "-"])
            .split(separator: "\n").filter { !$0.hasPrefix("#") }
            .compactMap { $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    /// Decoded audio samples (mono, 48 kHz) in the file.
    static func sampleCount(_ path: String) throws -> Int {
        try CLI.capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:a:0", "-ac", "1", "-ar", "48000", "-f", "s16le", "-"]).count / 2
    }

    /// kill -9 in the third part of a realtime run split every 3 s: parts 1 and 2 were finalized
    /// (regular MP4s of 90 pictures that decode cleanly), the third plays up to its last fragment
    /// (at most a second short of what was encoded), as RecordingSafetyTests says of one file.
    func testKillNineMidPartLeavesEarlierPartsWhole() throws {
        let dir = CLI.scratch()
        CLI.write("""
        pipeline: split-kill
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          tone:   {type: tone, rate: 48000}
          video:  {type: h264, in: screen, bitrate: 400k, gop: 30, keyframes: fixed}
          audio:  {type: aac, in: tone, bitrate: 64k}
          out:    {type: file, in: [video, audio], path: rec.mp4, split: 3s}
        """, to: dir + "/kill.pipe")
        let run = try BackgroundRun(["run", dir + "/kill.pipe", "--realtime", "--events", "json"])
        addTeardownBlock { if run.process.isRunning { kill(run.process.processIdentifier, SIGKILL) } }
        let second = run.waitFor(timeout: 20) { $0["event"] as? String == "recording" && $0["part"] as? Int == 2 }
        XCTAssertNotNil(second, "no recording event for part 2: \(run.stderr)")
        // Well into the third part (6 s to 9 s of media): a second and a half past its start.
        let inside = run.waitFor(timeout: 10) { e in
            e["event"] as? String == "stats" && (e["media_time"] as? Double ?? 0) >= 7.5
        }
        XCTAssertNotNil(inside)
        kill(run.process.processIdentifier, SIGKILL)
        XCTAssertEqual(run.waitForExit(), 9)

        let recordings = run.events.filter { $0["event"] as? String == "recording" }
        XCTAssertEqual(recordings.compactMap { $0["path"] as? String }, [dir + "/rec-001.mp4", dir + "/rec-002.mp4"])
        XCTAssertEqual(recordings.compactMap { $0["frames"] as? Int }, [90, 90])
        for n in 1...2 {
            let part = dir + "/rec-00\(n).mp4"
            XCTAssertEqual(try RecordingSafetyTests.decodeErrors(part), "", part)
            XCTAssertEqual(try Self.pictureHashes(part).count, 90, part)
            XCTAssertFalse(CLI.topLevelBoxes(part).contains("moof"), "\(part) was finalized as a regular MP4")
        }
        let third = dir + "/rec-003.mp4"
        XCTAssertEqual(try RecordingSafetyTests.decodeErrors(third), "", "the part being written plays as recorded")
        let held = try RecordingSafetyTests.packetSeconds(third)
        XCTAssertGreaterThan(min(held.video, held.audio), 0.4, "the third part holds its first fragments")
        XCTAssertTrue(CLI.topLevelBoxes(third).contains("moof"), "the third part is the journal")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".mp4") }.sorted(),
                       ["rec-001.mp4", "rec-002.mp4", "rec-003.mp4"])
    }

    /// A phone publishes 25 s over RTMP (ffmpeg -re); split 10s: three parts whose pictures, one
    /// after another, are an unsplit recording's of the same run, and whose audio samples add up
    /// to its own. Each part's recording event has its path and its picture count.
    func testRtmpPublishSplitEveryTenSecondsJoinsFrameExact() throws {
        let dir = CLI.scratch()
        let clip = dir + "/phone.mp4"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=320x240:r=30:d=25",
                           "-f", "lavfi", "-i", "sine=f=1000:r=48000:d=25", "-c:v", "libx264", "-preset", "veryfast", "-g", "30",
                           "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", clip])
        let port = try LoopbackPort.free()
        CLI.write("""
        pipeline: split-rtmp
        nodes:
          src:   {type: rtmp, url: "rtmp://127.0.0.1:\(port)/live/phone", listen: true, idle: 2s}
          fit:   {type: resize, in: src.video, size: 320x240}
          video: {type: h264, in: fit, bitrate: 400k, gop: 30, keyframes: fixed}
          audio: {type: aac, in: src.audio, bitrate: 64k}
          out:   {type: file, in: [video, audio], path: "phone-{part}.mp4", split: 10s}
          whole: {type: file, in: [video, audio], path: whole.mp4}
        """, to: dir + "/rtmp.pipe")
        let run = try BackgroundRun(["run", dir + "/rtmp.pipe", "--events", "json"])
        addTeardownBlock { if run.process.isRunning { kill(run.process.processIdentifier, SIGKILL) } }
        guard run.waitFor(timeout: 20, { $0["event"] as? String == "listening" }) != nil else { return XCTFail("no listening event: \(run.stderr)") }
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", clip, "-c", "copy", "-f", "flv", "rtmp://127.0.0.1:\(port)/live/phone"]), 0)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)

        let parts = (1...3).map { dir + "/phone-00\($0).mp4" }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/phone-004.mp4"))
        let whole = try Self.pictureHashes(dir + "/whole.mp4")
        let split = try parts.map(Self.pictureHashes)
        XCTAssertGreaterThan(whole.count, 24 * 30, "the session's pictures")
        XCTAssertEqual(split.flatMap { $0 }, whole, "the parts' pictures, one after another, are the session's: no hole, no repeat")
        XCTAssertEqual(split.prefix(2).map(\.count), [300, 300], "keyframes every second: cut at 10 s and 20 s")
        XCTAssertEqual(try parts.map(Self.sampleCount).reduce(0, +), try Self.sampleCount(dir + "/whole.mp4"))

        let recordings = run.events.filter { $0["event"] as? String == "recording" && $0["node"] as? String == "out" }
        XCTAssertEqual(recordings.compactMap { $0["path"] as? String }, parts)
        XCTAssertEqual(recordings.compactMap { $0["frames"] as? Int }, split.map(\.count))
        XCTAssertEqual(recordings.compactMap { $0["part"] as? Int }, [1, 2, 3])
    }

    /// With `upload`, each part is sent once finalized, in order, to its own URL (`{part}`), and
    /// arrives byte-identical; one `uploaded` event per part.
    func testEachPartIsUploaded() throws {
        let server = try LoopbackHTTP()
        addTeardownBlock { server.stop() }
        let dir = CLI.scratch()
        CLI.write("""
        pipeline: split-upload
        duration: 5s
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          tone:   {type: tone, rate: 48000}
          video:  {type: h264, in: screen, gop: 30, keyframes: fixed}
          audio:  {type: aac, in: tone}
          out:    {type: file, in: [video, audio], path: rec.mp4, split: 2s, upload: {url: "\(server.url("/up/rec-{part}.mp4"))"}}
        """, to: dir + "/up.pipe")
        let r = try CLI.run(["run", dir + "/up.pipe", "--events", "json"], timeout: 120)
        XCTAssertEqual(r.status, 0, r.stderr)
        let events = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let parts = (1...3).map { dir + "/rec-00\($0).mp4" }
        XCTAssertEqual(events.filter { $0["event"] as? String == "uploaded" }.compactMap { $0["path"] as? String }, parts)
        XCTAssertEqual(events.filter { $0["event"] as? String == "recording" }.compactMap { $0["frames"] as? Int }, [60, 60, 30])
        for n in 1...3 {
            let local = try Data(contentsOf: URL(fileURLWithPath: parts[n - 1]))
            let received = try Data(contentsOf: URL(fileURLWithPath: server.dir + "/received/PUT_up_rec-00\(n).mp4"))
            XCTAssertEqual(received, local, "part \(n) arrived byte-identical")
        }
    }
}
