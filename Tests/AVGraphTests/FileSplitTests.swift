import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// `file` with `split` and `keep`: the parts are judged by decoding them (ffmpeg) against an
/// unsplit recording of the same packets, written by a second sink in the same run.
final class FileSplitTests: XCTestCase {
    /// testsrc (its frame counter changes every picture) and a tone, encoded once, recorded whole and split.
    /// Keyframes exactly every `gop` pictures, so the cuts fall where the test says.
    static func pipe(seconds: Int, split: String, keep: String? = nil, gop: Int, whole: Bool = true) -> String {
        """
        pipeline: split
        duration: \(seconds)s
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          tone:   {type: tone, rate: 44100}
          video:  {type: h264, in: screen, bitrate: 400k, gop: \(gop), keyframes: fixed}
          audio:  {type: aac, in: tone, bitrate: 64k}
          out:    {type: file, in: [video, audio], path: rec.mp4, split: \(split)\(keep.map { ", keep: " + $0 } ?? "")}
        """ + (whole ? "\n  whole:  {type: file, in: [video, audio], path: whole.mp4}\n" : "\n")
    }

    /// Runs `yaml` offline in `dir`; returns the `recording` events of node `node`, in order.
    static func record(_ yaml: String, in dir: String, node: String = "out") throws -> [RecordingEvent] {
        let checked = TestSupport.check(yaml, in: dir)
        guard checked.isValid else { throw MediaError(checked.diagnostics.map(\.description).joined(separator: "\n")) }
        let log = EventLog(output: .none)
        let seen = Seen()
        log.onEvent { event in
            if let r = event.kind.declared(RecordingEvent.self), event.node == node { seen.add(r) }
        }
        try PipelineRun(checked, events: log, realtime: false).run()
        log.flush()
        return seen.all
    }

    final class Seen: @unchecked Sendable {
        private let lock = NSLock()
        private var events: [RecordingEvent] = []
        func add(_ e: RecordingEvent) { lock.lock(); events.append(e); lock.unlock() }
        var all: [RecordingEvent] { lock.lock(); defer { lock.unlock() }; return events }
    }

    /// The MD5 of each decoded picture, in order.
    static func pictureHashes(_ path: String) throws -> [String] {
        try TestSupport.shell(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "framemd5", "-"])
            .split(separator: "\n").filter { !$0.hasPrefix("#") }
            .compactMap { $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    /// The first presentation time of `type` packets in the file, in seconds.
    static func firstTime(_ path: String, _ type: String) throws -> Double? {
        let out = try TestSupport.shell(["ffprobe", "-v", "error", "-select_streams", type == "video" ? "v:0" : "a:0",
                                         "-show_entries", "packet=pts_time", "-of", "csv=p=0", "-read_intervals", "%+#1", path])
        return out.split(separator: "\n").first.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    }

    func files(_ dir: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".mp4") }.sorted()
    }

    /// 25 s split every 10 s with a keyframe every 1.5 s: cut at 10.5 s and 21 s, three parts of 315,
    /// 315 and 120 pictures, each starting at 0 with a keyframe, whose pictures decoded one after another are the unsplit file's, picture for
    /// picture; their audio holds the unsplit file's samples, none missing or twice, and the same
    /// waveform but for the first AAC frames after each join (each part decodes on its own).
    func testTenSecondPartsJoinFrameExact() throws {
        let dir = TestSupport.scratch()
        let events = try Self.record(Self.pipe(seconds: 25, split: "10s", gop: 45), in: dir)
        XCTAssertEqual(try files(dir), ["rec-001.mp4", "rec-002.mp4", "rec-003.mp4", "whole.mp4"])
        let parts = (1...3).map { dir + "/rec-00\($0).mp4" }

        let whole = try Self.pictureHashes(dir + "/whole.mp4")
        let split = try parts.map(Self.pictureHashes)
        XCTAssertEqual(whole.count, 750)
        XCTAssertEqual(split.map(\.count), [315, 315, 120])
        XCTAssertEqual(split.flatMap { $0 }, whole, "the parts' pictures, one after another, are the unsplit recording's")
        for part in parts {
            XCTAssertEqual(try Self.firstTime(part, "video") ?? -1, 0, accuracy: 0.0001, "\(part) starts at 0")
            XCTAssertEqual(try TestSupport.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=flags",
                                                  "-of", "csv=p=0", "-read_intervals", "%+#1", part]).prefix(1), "K", "\(part) opens on a keyframe")
        }

        let wholeAudio = try TestSupport.decodeAudio(dir + "/whole.mp4")
        let splitAudio = try parts.map { try TestSupport.decodeAudio($0) }
        XCTAssertGreaterThan(wholeAudio.count, 25 * 44100)
        XCTAssertEqual(splitAudio.map(\.count).reduce(0, +), wholeAudio.count, "every sample in exactly one part")
        let joined = splitAudio.flatMap { $0 }
        var joins: [Int] = []
        for a in splitAudio.dropLast() { joins.append((joins.last ?? 0) + a.count) }
        // The joins sit at the AAC frame that starts after the cut (10.5 s and 21 s), within one frame.
        for (join, cut) in zip(joins, [10.5, 21.0]) {
            XCTAssertEqual(Double(join) / 44100, cut, accuracy: 1024.0 / 44100, "audio join at \(join)")
        }
        let joinWindows = joins.map { $0..<($0 + 2048) }
        var worst = Float(0)
        for i in joined.indices where !joinWindows.contains(where: { $0.contains(i) }) {
            worst = max(worst, abs(joined[i] - wholeAudio[i]))
        }
        XCTAssertLessThan(worst, 0.01, "outside the first frames after a join the parts decode to the unsplit waveform")

        XCTAssertEqual(events.map(\.part), [1, 2, 3])
        XCTAssertEqual(events.map(\.path), parts)
        XCTAssertEqual(events.map(\.frames), [315, 315, 120])
        XCTAssertEqual(events.map(\.finalized), [true, true, true])
        for (e, part) in zip(events, parts) {
            let size = try FileManager.default.attributesOfItem(atPath: part)[.size] as? Int
            XCTAssertEqual(e.bytes, size, "\(part): bytes of the finalized file")
        }
        for (e, expected) in zip(events, [10.5, 10.5, 4.0]) { XCTAssertEqual(e.seconds, expected, accuracy: 0.03) }
    }

    /// split 5 s, keep 6 s over 22 s: after the last part is finalized (media end 22 s), only the
    /// parts that ended within 6 s of it remain (4: 15-20 s, 5: 20-22 s); every part was announced.
    func testKeepDeletesOlderParts() throws {
        let dir = TestSupport.scratch()
        let events = try Self.record(Self.pipe(seconds: 22, split: "5s", keep: "6s", gop: 30, whole: false), in: dir)
        XCTAssertEqual(events.map(\.part), [1, 2, 3, 4, 5])
        XCTAssertEqual(events.map(\.frames), [150, 150, 150, 150, 60])
        XCTAssertEqual(try files(dir), ["rec-004.mp4", "rec-005.mp4"])
        XCTAssertEqual(try Self.pictureHashes(dir + "/rec-004.mp4").count, 150)
    }

    /// Audio only: the cut is at each multiple (the first AAC frame at or after it); the parts
    /// start at 0 and their samples add up to the unsplit file's.
    func testAudioOnlyCutsAtTheMultiple() throws {
        let dir = TestSupport.scratch()
        let yaml = """
        pipeline: split
        duration: 10s
        nodes:
          tone:  {type: tone, rate: 48000}
          audio: {type: aac, in: tone, bitrate: 64k}
          out:   {type: file, in: audio, path: "talk-{part}.mp4", split: 4s}
          whole: {type: file, in: audio, path: whole.mp4}
        """
        let events = try Self.record(yaml, in: dir)
        XCTAssertEqual(try files(dir), ["talk-001.mp4", "talk-002.mp4", "talk-003.mp4", "whole.mp4"])
        let counts = try (1...3).map { try TestSupport.decodeAudio(dir + "/talk-00\($0).mp4", rate: 48000).count }
        XCTAssertEqual(counts.reduce(0, +), try TestSupport.decodeAudio(dir + "/whole.mp4", rate: 48000).count)
        for (count, length) in zip(counts.prefix(2), [4.0, 4.0]) {
            XCTAssertEqual(Double(count) / 48000, length, accuracy: 1024.0 / 48000)
        }
        for n in 2...3 {
            let first = try XCTUnwrap(Self.firstTime(dir + "/talk-00\(n).mp4", "audio"))
            XCTAssertGreaterThanOrEqual(first, 0)
            XCTAssertLessThan(first, 1024.0 / 48000, "part \(n) starts within one frame of its multiple")
        }
        XCTAssertEqual(events.map(\.frames), [0, 0, 0])
        XCTAssertEqual(events.map(\.part), [1, 2, 3])
    }

    /// Without split, the one file is part 1 of a `recording` event; `{part}` reads 001.
    func testOneFileIsAnnouncedAsPartOne() throws {
        let dir = TestSupport.scratch()
        let yaml = """
        pipeline: one
        duration: 2s
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          video:  {type: h264, in: screen}
          out:    {type: file, in: video, path: "take-{part}.mkv"}
        """
        let events = try Self.record(yaml, in: dir)
        XCTAssertEqual(events.count, 1)
        XCTAssertEqual(events.first?.path, dir + "/take-001.mkv")
        XCTAssertEqual(events.first?.frames, 60)
        XCTAssertEqual(events.first?.finalized, true)
        XCTAssertEqual(events.first?.seconds ?? 0, 2, accuracy: 0.001)
        XCTAssertEqual(try Self.pictureHashes(dir + "/take-001.mkv").count, 60)
    }

    /// What check says about the new options, each at its place in the file.
    func testCheckRefusesWhatCannotBeSplit() throws {
        let dir = TestSupport.scratch()
        func problems(_ out: String) -> [String] {
            let yaml = """
            pipeline: c
            nodes:
              screen: {type: testsrc, size: 320x240, rate: 30}
              video:  {type: h264, in: screen}
              out:    {type: file, in: video, \(out)}
            """
            return TestSupport.check(yaml, in: dir).diagnostics.map(\.description)
        }
        XCTAssertTrue(problems("path: a.mp4, split: 10s").isEmpty)
        XCTAssertTrue(problems("path: \"a-{part}.mp4\", split: 10s, keep: 1h").isEmpty)
        XCTAssertTrue(problems("path: a.mp4, keep: 10s").joined().contains("there is no split"), "\(problems("path: a.mp4, keep: 10s"))")
        XCTAssertTrue(problems("path: \"{part}/a.mp4\", split: 10s").joined().contains("only in the file name"))
        XCTAssertTrue(problems("path: a.mp4, split: 0.5s").joined().contains("split"))
        XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/a-017.mp4", contents: Data()))
        let existing = problems("path: a.mp4, split: 10s").joined()
        XCTAssertTrue(existing.contains("a-017.mp4' already exists"), existing)
        XCTAssertTrue(problems("path: a.mp4, split: 10s, overwrite: true").isEmpty)
    }
}
