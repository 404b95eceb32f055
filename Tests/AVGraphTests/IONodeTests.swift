import AVGraph
import AVGraphNodes
import CFFmpeg
import Foundation
import XCTest

/// Test-only source: the audio packets of a file, as an encoder would emit them (there is no aac
/// node in this branch). `codec` pretends another codec, for format checks that never run.
final class EncodedAudioSource: Source, Node, @unchecked Sendable {
    static let typeName = "test-encoded-audio"
    static let summary = "test: demuxed audio packets"
    static let outputs = [PadSpec("audio", [.encodedAudio])]
    static let options = [
        OptionSpec("path", .path(mustExist: true), required: true, doc: "file"),
        OptionSpec("codec", .string, doc: "claimed codec"),
        OptionSpec("fail-after", .int(1...100_000), doc: "throw after this many packets"),
    ]

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        var f = StreamFormat(kind: .encodedAudio)
        f.codec = n.options.string("codec") ?? "aac"
        f.sampleRate = 44100
        f.channels = 1
        return [f]
    }

    let demuxer: Demuxer
    let index: Int
    let stream: EncodedStream
    let packet = av_packet_alloc()!
    let failAfter: Int?
    var sent = 0

    init(_ setup: NodeSetup) throws {
        failAfter = setup.options.int("fail-after")
        demuxer = try Demuxer(path: setup.path("path")!)
        index = demuxer.bestStream(AVMEDIA_TYPE_AUDIO)!
        let st = demuxer.stream(index)
        stream = EncodedStream(copying: st.pointee.codecpar, timeBase: Rational(st.pointee.time_base), kind: .encodedAudio)
    }

    override func produce(_ out: Outlet) throws -> Bool {
        while try demuxer.read(into: packet) {
            if Int(packet.pointee.stream_index) == index {
                if let failAfter, sent >= failAfter { throw MediaError("test failure") }
                sent += 1
                out.emit(Packet(owning: av_packet_clone(packet), stream: stream))
                return true
            }
        }
        return false
    }
}

/// Test-only sink that keeps the orientation tag of every frame it gets.
final class OrientationRecorder: Sink, Node, @unchecked Sendable {
    static let typeName = "test-orientations"
    static let summary = "test: records frame orientations"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    static let seen = LockedLines()
    init(_ setup: NodeSetup) throws {}
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        if let f = buffer.frame { Self.seen.append(f.orientation.rawValue) }
    }
}

/// Test-only source whose picture size changes while running (as a turning screen's does).
final class VaryingSizeSource: Source, Node, @unchecked Sendable {
    static let typeName = "test-varying"
    static let summary = "test: a video source whose size varies"
    static let outputs = [PadSpec("video", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        var f = StreamFormat.video(width: 640, height: 360, pixelFormat: "nv12", frameRate: Rational(30, 1))
        f.sizeVaries = true
        return [f]
    }
    init(_ setup: NodeSetup) throws {}
}

final class IONodeTests: XCTestCase {
    /// 3 s of 320x240 30 fps H.264 (with B-frames, as ffmpeg's default) and a 440 Hz AAC tone.
    static let clip: String = {
        let dir = TestSupport.scratch("ioclip")
        let path = dir + "/in.mp4"
        _ = try? TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30",
                                    "-f", "lavfi", "-i", "sine=f=440:sample_rate=44100", "-t", "3",
                                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", path])
        return path
    }()

    static let registry: NodeRegistry = {
        let r = TestSupport.freshRegistry()
        try! r.register(EncodedAudioSource.self)
        try! r.register(VaryingSizeSource.self)
        try! r.register(OrientationRecorder.self)
        return r
    }()

    func check(_ yaml: String, in dir: String) -> CheckedPipeline {
        let path = dir + "/test.pipe"
        try! yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return Checker(registry: Self.registry).check(path: path)
    }

    /// Checks and runs; returns the events of the run (one JSON object each).
    @discardableResult
    func run(_ yaml: String, in dir: String, realtime: Bool? = nil, during: (@Sendable (PipelineRun) -> Void)? = nil,
             file: StaticString = #filePath, line: UInt = #line) throws -> [[String: Any]] {
        let checked = check(yaml, in: dir)
        guard checked.isValid else {
            XCTFail("pipe does not check:\n" + checked.diagnostics.map(\.description).joined(separator: "\n"), file: file, line: line)
            throw MediaError("invalid pipe")
        }
        let log = EventLog(output: .none)
        let lines = LockedLines()
        log.addListener { lines.append($0) }
        let run = try PipelineRun(checked, events: log, realtime: realtime)
        if let during { DispatchQueue.global().async { during(run) } }
        try run.run()
        return lines.all.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func errors(_ checked: CheckedPipeline) -> String {
        checked.diagnostics.filter { $0.severity == .error }.map(\.description).joined(separator: "\n")
    }

    func videoStream(_ path: String) throws -> [String: Any] {
        let p = try TestSupport.probe(path, extra: ["-count_frames", "-select_streams", "v:0"])
        return (p["streams"] as? [[String: Any]])?.first ?? [:]
    }

    /// The top-level box types of an MP4 file, in order.
    func topLevelAtoms(_ path: String) throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        var atoms: [String] = []
        var at = 0
        while at + 8 <= data.count {
            var size = data[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
            let type = String(decoding: data[at + 4..<at + 8], as: UTF8.self)
            if size == 1, at + 16 <= data.count { size = data[at + 8..<at + 16].reduce(0) { $0 << 8 | Int($1) } }
            if size == 0 { size = data.count - at }
            guard size >= 8 else { break }
            atoms.append(type)
            at += size
        }
        return atoms
    }

    /// The decoded pictures as stored (yuv420p, no conversion).
    func rawVideo(_ path: String) throws -> [UInt8] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return [UInt8](data)
    }

    func testEncodesClipToMP4WithFaststart() throws {
        let dir = TestSupport.scratch()
        try run("""
            nodes:
              src: {type: file, path: \(Self.clip)}
              enc: {type: h264, in: src.video, bitrate: 800k}
              out: {type: file, in: [enc], path: out.mp4}
            """, in: dir)
        let v = try videoStream(dir + "/out.mp4")
        XCTAssertEqual(v["codec_name"] as? String, "h264")
        XCTAssertEqual(v["profile"] as? String, "High")
        XCTAssertEqual(v["nb_read_frames"] as? String, "90")
        XCTAssertEqual(v["width"] as? Int, 320)
        XCTAssertEqual(v["height"] as? Int, 240)
        XCTAssertEqual(v["has_b_frames"] as? Int, 0)
        XCTAssertEqual(v["avg_frame_rate"] as? String, "30/1")
        XCTAssertEqual(v["color_primaries"] as? String, "bt709")
        XCTAssertEqual(v["color_transfer"] as? String, "bt709")
        XCTAssertEqual(v["color_space"] as? String, "bt709")
        XCTAssertEqual(v["color_range"] as? String, "tv")
        let types = try TestSupport.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pict_type",
                                           "-of", "csv=p=0", dir + "/out.mp4"]).split(separator: "\n").map { String($0.prefix { $0 != "," }) }
        XCTAssertEqual(types.count, 90)
        XCTAssertFalse(types.contains("B"))
        XCTAssertEqual(types.first, "I")
        // Default gop is 2 s: keyframes at frames 0 and 60.
        XCTAssertEqual(types.indices.filter { types[$0] == "I" }, [0, 60])
        let atoms = try topLevelAtoms(dir + "/out.mp4")
        let moov = try XCTUnwrap(atoms.firstIndex(of: "moov")), mdat = try XCTUnwrap(atoms.firstIndex(of: "mdat"))
        XCTAssertLessThan(moov, mdat, "faststart puts moov first: \(atoms)")
        // The pictures are the clip's: compare a frame with the source, decoded independently.
        let ours = try TestSupport.decodeGray(dir + "/out.mp4", width: 320, height: 240)
        let theirs = try TestSupport.decodeGray(Self.clip, width: 320, height: 240)
        XCTAssertEqual(ours.count, 90)
        let diff = zip(ours[45], theirs[45]).map { abs(Int($0) - Int($1)) }.reduce(0, +) / ours[45].count
        XCTAssertLessThan(diff, 6, "mean luma difference at frame 45")
    }

    func testFragmentedMP4AndAudio() throws {
        let dir = TestSupport.scratch()
        try run("""
            nodes:
              src: {type: file, path: \(Self.clip)}
              aud: {type: test-encoded-audio, path: \(Self.clip)}
              enc: {type: h264, in: src.video, bitrate: 500k, gop: 30}
              out: {type: file, in: [enc, aud], path: frag.mp4, fragmented: true}
            """, in: dir)
        let atoms = try topLevelAtoms(dir + "/frag.mp4")
        XCTAssertTrue(atoms.contains("moof"), "\(atoms)")
        XCTAssertLessThan(try XCTUnwrap(atoms.firstIndex(of: "moov")), try XCTUnwrap(atoms.firstIndex(of: "moof")))
        XCTAssertEqual(try videoStream(dir + "/frag.mp4")["nb_read_frames"] as? String, "90")
        let samples = try TestSupport.decodeAudio(dir + "/frag.mp4", rate: 44100)
        XCTAssertEqual(Double(samples.count) / 44100, 3, accuracy: 0.1)
        XCTAssertGreaterThan(TestSupport.toneLevel(samples[44100..<88200], freq: 440, rate: 44100), 0.1)
    }

    func testMKVTSAndFLVFromOneEncoder() throws {
        let dir = TestSupport.scratch()
        try run("""
            nodes:
              src: {type: file, path: \(Self.clip)}
              aud: {type: test-encoded-audio, path: \(Self.clip)}
              enc: {type: h264, in: src.video, bitrate: 500k}
              mkv: {type: file, in: [enc, aud], path: out.mkv}
              ts:  {type: file, in: [enc, aud], path: out.ts}
              flv: {type: file, in: [enc, aud], path: out.flv}
            """, in: dir)
        for name in ["out.mkv", "out.ts", "out.flv"] {
            let v = try videoStream(dir + "/" + name)
            XCTAssertEqual(v["codec_name"] as? String, "h264", name)
            XCTAssertEqual(v["nb_read_frames"] as? String, "90", name)
            let streams = try TestSupport.probe(dir + "/" + name)["streams"] as? [[String: Any]] ?? []
            XCTAssertEqual(streams.compactMap { $0["codec_name"] as? String }.sorted(), ["aac", "h264"], name)
        }
    }

    func testLoopContinuesTimestamps() throws {
        let dir = TestSupport.scratch()
        try run("""
            nodes:
              src: {type: file, path: \(Self.clip), loop: 2}
              enc: {type: h264, in: src.video, preset: ultrafast}
              out: {type: file, in: enc, path: loop.mkv}
            """, in: dir)
        let v = try videoStream(dir + "/loop.mkv")
        XCTAssertEqual(v["nb_read_frames"] as? String, "180")
        let format = try TestSupport.probe(dir + "/loop.mkv")["format"] as? [String: Any]
        XCTAssertEqual(Double(format?["duration"] as? String ?? "") ?? 0, 6, accuracy: 0.1)
    }

    func testNullCountsFramesOfBothStreams() throws {
        let dir = TestSupport.scratch()
        let events = try run("""
            nodes:
              src: {type: file, path: \(Self.clip)}
              sink: {type: null, in: [src.video, src.audio]}
            """, in: dir)
        let null = try XCTUnwrap(events.first { $0["event"] as? String == "null" })
        let counts = try XCTUnwrap(null["counts"] as? [Int])
        XCTAssertEqual(counts[0], 90)
        // 3 s of AAC is 130 blocks of 1024 samples (the last one partial).
        XCTAssertEqual(Double(counts[1]), 3 * 44100 / 1024, accuracy: 1.5)
        let bytes = try XCTUnwrap(null["bytes"] as? [Int])
        XCTAssertGreaterThanOrEqual(bytes[0], 90 * 320 * 240 * 3 / 2)
    }

    func testMissingStreamGivesAnEmptyOutput() throws {
        let dir = TestSupport.scratch()
        _ = try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-i", Self.clip, "-t", "1", "-an", "-c", "copy", dir + "/silent.mp4"])
        let events = try run("""
            nodes:
              src: {type: file, path: silent.mp4}
              sink: {type: null, in: [src.video, src.audio]}
            """, in: dir)
        let counts = try XCTUnwrap(events.first { $0["event"] as? String == "null" }?["counts"] as? [Int])
        let expected = Int(try videoStream(dir + "/silent.mp4")["nb_read_frames"] as? String ?? "")
        XCTAssertEqual(counts, [try XCTUnwrap(expected), 0])
    }

    func testOddSizeAndVaryingSizeAreRefused() throws {
        let dir = TestSupport.scratch()
        _ = try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=161x121:rate=10", "-t", "0.5",
                                   "-pix_fmt", "rgb24", "-c:v", "ffv1", dir + "/odd.mkv"])
        let odd = check("""
            nodes:
              src: {type: file, path: odd.mkv}
              enc: {type: h264, in: src.video}
              out: {type: null, in: enc}
            """, in: dir)
        XCTAssertTrue(errors(odd).contains("h264 needs an even width and height; got 161x121"), errors(odd))
        XCTAssertTrue(errors(odd).contains("resize"), errors(odd))
        let varying = check("""
            nodes:
              src: {type: test-varying}
              enc: {type: h264, in: src}
              out: {type: null, in: enc}
            """, in: dir)
        XCTAssertTrue(errors(varying).contains("size changes"), errors(varying))
        XCTAssertTrue(errors(varying).contains("put a resize before h264"), errors(varying))
    }

    func testRGBInputIsConvertedWithBT709() throws {
        // Pure green in RGB: BT.709 limited-range luma is 16 + 219 * 0.7152 = 173 (BT.601 would give 145).
        let dir = TestSupport.scratch()
        _ = try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x00FF00:size=160x120:rate=10", "-t", "1",
                                   "-pix_fmt", "rgb24", "-c:v", "ffv1", dir + "/green.mkv"])
        try run("""
            nodes:
              src: {type: file, path: green.mkv}
              enc: {type: h264, in: src.video, crf: 10}
              out: {type: file, in: enc, path: green.mp4}
            """, in: dir)
        // The stored Y plane as is (a conversion to gray would expand it to full range).
        let data = try rawVideo(dir + "/green.mp4")
        let frameSize = 160 * 120 * 3 / 2
        XCTAssertEqual(data.count, 10 * frameSize)
        let y = data[5 * frameSize..<5 * frameSize + 160 * 120]
        let mean = Double(y.map(Int.init).reduce(0, +)) / Double(y.count)
        XCTAssertEqual(mean, 173, accuracy: 3)
        XCTAssertEqual(try videoStream(dir + "/green.mp4")["color_range"] as? String, "tv")
    }

    func testRotationTagBecomesFrameOrientation() throws {
        // FFmpeg 5.1 stores `rotate=90` as a display matrix that turns the picture 90° counter-clockwise
        // (ffprobe: rotation=90; ffmpeg's autorotate applies transpose=cclock): `left` (EXIF 8).
        let dir = TestSupport.scratch()
        _ = try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-i", Self.clip, "-t", "0.5", "-c", "copy",
                                   "-metadata:s:v:0", "rotate=90", dir + "/rotated.mp4"])
        let before = OrientationRecorder.seen.all.count
        try run("""
            nodes:
              src: {type: file, path: rotated.mp4}
              rec: {type: test-orientations, in: src.video}
            """, in: dir)
        let seen = OrientationRecorder.seen.all.dropFirst(before)
        XCTAssertGreaterThan(seen.count, 10)
        XCTAssertEqual(Set(seen), ["left"])
    }

    func testFailedRunStillLeavesPlayableFile() throws {
        let dir = TestSupport.scratch()
        // Realtime, so the video is under way when the audio source fails at 1.4 s.
        let checked = check("""
            realtime: true
            nodes:
              src: {type: file, path: \(Self.clip)}
              aud: {type: test-encoded-audio, path: \(Self.clip), fail-after: 60}
              enc: {type: h264, in: src.video, preset: ultrafast}
              out: {type: file, in: [enc, aud], path: cut.mp4}
            """, in: dir)
        XCTAssertTrue(checked.isValid, errors(checked))
        let run = try PipelineRun(checked, events: EventLog(output: .none))
        XCTAssertThrowsError(try run.run()) { XCTAssertTrue("\($0)".contains("node 'aud'"), "\($0)") }
        // 60 AAC packets are 1.39 s: the file holds at least that much, and plays.
        let samples = try TestSupport.decodeAudio(dir + "/cut.mp4", rate: 44100)
        XCTAssertEqual(Double(samples.count) / 44100, 60 * 1024 / 44100, accuracy: 0.1)
        let frames = Int(try videoStream(dir + "/cut.mp4")["nb_read_frames"] as? String ?? "") ?? 0
        XCTAssertGreaterThan(frames, 20)
    }

    func testNV12InputIsEncodedAsIs() throws {
        let dir = TestSupport.scratch()
        _ = try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=10", "-t", "1",
                                   "-pix_fmt", "nv12", "-c:v", "rawvideo", dir + "/nv12.nut"])
        try run("""
            nodes:
              src: {type: file, path: nv12.nut}
              enc: {type: h264, in: src.video, crf: 12}
              out: {type: file, in: enc, path: nv12.mp4}
            """, in: dir)
        let ours = try TestSupport.decodeGray(dir + "/nv12.mp4", width: 160, height: 120)
        let theirs = try TestSupport.decodeGray(dir + "/nv12.nut", width: 160, height: 120)
        XCTAssertEqual(ours.count, 10)
        let diff = zip(ours[5], theirs[5]).map { abs(Int($0) - Int($1)) }.reduce(0, +) / ours[5].count
        XCTAssertLessThan(diff, 4, "mean luma difference at frame 5")
    }

    func testContainerChecks() throws {
        let dir = TestSupport.scratch()
        func sinkErrors(_ extra: String) -> String {
            errors(check("""
                nodes:
                  aud: {type: test-encoded-audio, path: \(Self.clip), codec: opus}
                  out: {type: file, in: aud, \(extra)}
                """, in: dir))
        }
        let flv = sinkErrors("path: out.flv")
        XCTAssertTrue(flv.contains("a .flv file cannot hold opus"), flv)
        XCTAssertTrue(sinkErrors("path: out.mkv").isEmpty, sinkErrors("path: out.mkv"))
        let unknown = sinkErrors("path: out.avi")
        XCTAssertTrue(unknown.contains("unknown container '.avi'") && unknown.contains(".mp4, .mov, .mkv, .flv, .ts"), unknown)
        let frag = sinkErrors("path: out.mkv, fragmented: true")
        XCTAssertTrue(frag.contains("fragmented applies to .mp4 and .mov"), frag)
        XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/exists.mkv", contents: Data("keep".utf8)))
        let exists = sinkErrors("path: exists.mkv")
        XCTAssertTrue(exists.contains("already exists"), exists)
        XCTAssertTrue(sinkErrors("path: exists.mkv, overwrite: true").isEmpty)
        XCTAssertEqual(try String(contentsOfFile: dir + "/exists.mkv", encoding: .utf8), "keep")
    }

    func testUnwritablePathFailsAtStartAndLeavesNoFile() throws {
        let dir = TestSupport.scratch()
        let target = "/proc/avgraph-io-test.mp4"
        let checked = check("""
            nodes:
              src: {type: file, path: \(Self.clip)}
              enc: {type: h264, in: src.video}
              out: {type: file, in: enc, path: \(target)}
            """, in: dir)
        XCTAssertTrue(checked.isValid, errors(checked))
        XCTAssertThrowsError(try PipelineRun(checked, events: EventLog(output: .none))) { error in
            XCTAssertTrue("\(error)".contains("node 'out'") && "\(error)".contains("cannot write '\(target)'"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: target))
    }

    func testFailureBeforeHeaderLeavesNoFile() throws {
        // The flv muxer refuses opus when the header is written: the run fails and leaves nothing behind.
        let dir = TestSupport.scratch()
        _ = try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:sample_rate=48000", "-t", "1",
                                   "-c:a", "libopus", dir + "/opus.mkv"])
        let checked = check("""
            nodes:
              aud: {type: test-encoded-audio, path: opus.mkv}
              out: {type: file, in: aud, path: out.flv}
            """, in: dir)
        // The test source claims aac to get past check; the packets are opus.
        XCTAssertTrue(checked.isValid, errors(checked))
        let run = try PipelineRun(checked, events: EventLog(output: .none))
        XCTAssertThrowsError(try run.run()) {
            XCTAssertTrue("\($0)".contains("node 'out'") && "\($0)".contains("header"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out.flv"))
    }

    func testLiveBitrateChange() throws {
        let dir = TestSupport.scratch()
        let events = try run("""
            realtime: true
            nodes:
              src: {type: file, path: \(Self.clip)}
              enc: {type: h264, in: src.video, bitrate: 100k, preset: ultrafast}
              out: {type: file, in: enc, path: live.mkv}
            """, in: dir, during: { run in
                while run.clock < 1.5 { usleep(20_000) }
                run.set(node: "enc", option: "bitrate", value: .int(3_000_000)) { _ in }
            })
        let applied = try XCTUnwrap(events.first { $0["event"] as? String == "applied" })
        XCTAssertEqual(applied["value"] as? Int, 3_000_000)
        let at = try XCTUnwrap(applied["media_time"] as? Double)
        // Bytes per second before and after the change, from the file.
        let lines = try TestSupport.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time,size",
                                           "-of", "csv=p=0", dir + "/live.mkv"]).split(separator: "\n")
        var before = 0, after = 0, nBefore = 0, nAfter = 0
        for l in lines {
            let f = l.split(separator: ",")
            guard f.count == 2, let t = Double(f[0]), let s = Int(f[1]) else { continue }
            if t < at - 0.1 { before += s; nBefore += 1 } else if t > at + 0.5 { after += s; nAfter += 1 }
        }
        XCTAssertGreaterThan(nBefore, 5)
        XCTAssertGreaterThan(nAfter, 5)
        XCTAssertGreaterThan(Double(after) / Double(nAfter), 3 * Double(before) / Double(nBefore))
    }
}

final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ s: String) { lock.lock(); lines.append(s); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
}
