import AVGraphTesting
import Foundation
import XCTest

/// `h264 passthrough: auto` (issue 41): a phone's own H.264 packets recorded as they came, the
/// privacy card encoded by us and spliced in where the phone's in-band switch put it.
final class PassthroughTests: XCTestCase {
    /// The publisher's clip: 720x1280 H.264 at 30 fps, a keyframe every 2 s (as a phone's app
    /// sends), AAC; 30 s.
    static let seconds = 30
    static let gop = 60

    static func phoneClip(_ path: String, seconds: Int = seconds) throws {
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=720x1280:r=30:d=\(seconds)",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=\(seconds)", "-c:v", "libx264", "-preset", "ultrafast",
                           "-profile:v", "main", "-g", "\(gop)", "-keyint_min", "\(gop)", "-sc_threshold", "0", "-bf", "0",
                           "-b:v", "2500k", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", path])
    }

    /// A scratch folder with the phone's clip (`phone.flv`) in it, a free loopback port, the assets folder.
    static func phoneScene(seconds: Int) throws -> (dir: String, flv: String, port: Int, assets: String) {
        let dir = CLI.scratch()
        try phoneClip(dir + "/phone.flv", seconds: seconds)
        return (dir, dir + "/phone.flv", try LoopbackPort.free(), CLI.packageRoot + "/assets")
    }

    /// One line per packet of `path`'s first video (or `stream`), copied as stored (no decoding): its MD5.
    static func packetHashes(_ path: String, stream: String = "0:v:0") throws -> [String] {
        let out = try CLI.shell(["ffmpeg", "-v", "error", "-i", path, "-map", stream, "-c", "copy", "-f", "framemd5", "-"])
        return out.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in
            line.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    static func keyframeIndices(_ path: String) throws -> [Int] {
        let out = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=flags", "-of", "csv=p=0", path])
        return out.split(separator: "\n").enumerated().filter { $0.element.hasPrefix("K") }.map(\.offset)
    }

    static func meanDistance(_ a: [UInt8], _ b: [UInt8]) -> Double {
        Double(zip(a, b).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }) / Double(max(a.count, 1))
    }

    func testPhoneStreamRecordedAsSentWithTheCardSplicedInFrameExact() throws {
        let dir = CLI.scratch()
        let flv = dir + "/phone.flv"
        try Self.phoneClip(flv)
        let port = try LoopbackPort.free()
        let assets = CLI.packageRoot + "/assets"
        CLI.write("""
        pipeline: passthrough
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, size: 720x1280, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png}
          video:   {type: h264, in: privacy, passthrough: auto, preset: ultrafast, queue: {size: 60}}
          audio:   {type: aac, in: src.audio}
          out:     {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        // Three switches, each on mid-GOP and off mid-GOP: (on, off) in pictures at 30 fps.
        let switches = [(150, 285), (399, 459), (630, 726)]
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone"]
            + switches.flatMap { ["--privacy", "\($0.0 * 100 / 3)ms:\(($0.1 - $0.0) * 100 / 3)ms"] }, timeout: 60)
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let recording = dir + "/out.mp4"
        // The encoder's account: 900 pictures, those of the three spans encoded.
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        XCTAssertEqual(account["node"] as? String, "video")
        XCTAssertEqual(account["encoded"] as? Int, (300 - 150) + (480 - 399) + (780 - 630))
        XCTAssertEqual(account["passed"] as? Int, 900 - (account["encoded"] as? Int ?? 0))
        XCTAssertEqual(account["spans"] as? Int, 3)
        XCTAssertEqual(account["max_overstay"] as? Double ?? 0, 1.8, accuracy: 0.04)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertEqual(warnings.filter { $0.contains("passthrough") }, [], "passthrough takes the phone's stream")
        XCTAssertEqual(Self.videoBytes(run, node: "src"), 0, "no picture was decoded: each went on as its packet, the card needs none")

        let expected = try Self.assertSpliced(recording, source: flv, switches: switches, pictures: Self.seconds * 30)

        try Self.assertCard(recording, source: flv, spans: expected, assets: assets)

        try assertPlaysEverywhere(recording, pictures: Self.seconds * 30)
        // Duration and sync as the source's.
        let a = try CLI.probe(flv), b = try CLI.probe(recording)
        let sourceDuration = Double((a["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        let recordedDuration = Double((b["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(recordedDuration, sourceDuration, accuracy: 0.1)
        func startGap(_ probe: [String: Any]) -> Double {
            let streams = probe["streams"] as? [[String: Any]] ?? []
            func start(_ type: String) -> Double { Double(streams.first { $0["codec_type"] as? String == type }?["start_time"] as? String ?? "") ?? .nan }
            return start("audio") - start("video")
        }
        XCTAssertEqual(startGap(b), startGap(a), accuracy: 0.05, "audio against video as the publisher sent them")
    }

    /// Pictures: every one in a span is the card (the privacy node's, fitted as ffmpeg fits it),
    /// every other decodes as the publisher's.
    static func assertCard(_ recording: String, source: String, spans expected: [(Int, Int)], assets: String,
                           file: StaticString = #filePath, line: UInt = #line) throws {
        let size = (w: 90, h: 160)
        let shown = try HlsWitness.grayPictures(recording, width: size.w, height: size.h)
        let original = try HlsWitness.grayPictures(source, width: size.w, height: size.h)
        // The card as the privacy node fits it (inside the picture, black bars), drawn by ffmpeg.
        let fitted = try CLI.capture(["ffmpeg", "-v", "error", "-i", assets + "/privacy.png", "-vf",
                                      "scale=720:1280:force_original_aspect_ratio=decrease,pad=720:1280:(ow-iw)/2:(oh-ih)/2,scale=\(size.w):\(size.h)",
                                      "-pix_fmt", "gray", "-f", "rawvideo", "-"])
        let card = [UInt8](fitted)
        XCTAssertEqual(shown.count, original.count, file: file, line: line)
        guard let first = expected.first, first.0 < shown.count else { return XCTFail("no card span", file: file, line: line) }
        let inSpan = { (k: Int) in expected.contains { k >= $0.0 && k < $0.1 } }
        var worstCard = 0.0, worstSource = 0.0
        for k in 0..<min(shown.count, original.count) {
            if inSpan(k) {
                worstCard = max(worstCard, meanDistance(shown[k], shown[first.0]))
                XCTAssertGreaterThan(meanDistance(shown[k], original[k]), 8, "picture \(k) is hidden", file: file, line: line)
            } else {
                worstSource = max(worstSource, meanDistance(shown[k], original[k]))
            }
        }
        XCTAssertLessThan(worstCard, 2, "every picture in a span is the same card", file: file, line: line)
        XCTAssertLessThan(meanDistance(shown[first.0], card), 6, "and it is the privacy card", file: file, line: line)
        XCTAssertEqual(worstSource, 0, "the publisher's pictures decode exactly as sent", file: file, line: line)
    }

    /// `aac passthrough: auto`: the phone's AAC packets go out as they came (not decoded audio
    /// encoded again), in one track an MP4 player decodes, as long as the source's audio. The
    /// phone's audio is mono: the source declares one channel, so it is only re-laid (planar to
    /// interleaved), not mixed. Nothing reads the samples, so the source decodes only the first
    /// two frames (to check they are the 1024-sample AAC-LC frames the configuration says) and
    /// times the others by their packets.
    func testPhoneAudioRecordedAsSent() throws {
        let (dir, flv, run) = try recordPhoneAudio(seconds: 10, sourceChannels: 1)
        let recording = dir + "/out.mp4"
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertEqual(warnings.filter { $0.contains("passthrough") }, [], "passthrough takes the phone's audio")

        let sent = try Self.packetHashes(flv, stream: "0:a:0"), recorded = try Self.packetHashes(recording, stream: "0:a:0")
        XCTAssertGreaterThan(sent.count, 400, "10 s of 48 kHz AAC: 469 packets")
        XCTAssertEqual(recorded, sent, "every audio packet is the phone's, byte for byte, in order")
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" && $0["node"] as? String == "audio" },
                                    "no passthrough event from aac")
        XCTAssertEqual(account["passed"] as? Int, sent.count, "every frame sent as the phone's packet")
        XCTAssertEqual(account["encoded"] as? Int, 0)
        // Decoded, 469 mono frames would be 1.9 MB of float samples.
        XCTAssertLessThanOrEqual(Self.audioBytes(run, node: "src") ?? .max, 2 * 4 * 4096, "the source decoded only the first two frames")
        let decode = try Tool.run(["ffmpeg", "-v", "error", "-xerror", "-i", recording, "-map", "0:a", "-f", "null", "-"])
        XCTAssertEqual(decode.status, 0, decode.stderr)
        XCTAssertEqual(decode.stderr.trimmingCharacters(in: .whitespacesAndNewlines), "", "no decode error")
        // Timed as the phone sent it: the audio spans as long, and starts where it did against the video.
        func times(_ path: String, _ stream: String) throws -> [Double] {
            try CLI.shell(["ffprobe", "-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time", "-of", "csv=p=0", path])
                .split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
        }
        let (sentAudio, recordedAudio) = (try times(flv, "a:0"), try times(recording, "a:0"))
        let (sentVideo, recordedVideo) = (try times(flv, "v:0"), try times(recording, "v:0"))
        XCTAssertEqual(recordedAudio.last! - recordedAudio.first!, sentAudio.last! - sentAudio.first!, accuracy: 0.03)
        XCTAssertEqual(recordedAudio.first! - recordedVideo.first!, sentAudio.first! - sentVideo.first!, accuracy: 0.03)
    }

    /// When the source's audio must be converted (the phone's is mono, the source declares
    /// stereo), `aac passthrough: auto` encodes every frame: the source, which decoded none itself
    /// past the first two, decodes each when it converts it, in order, and the sound is the phone's.
    func testAudioDecodedOnRequestWhenItMustBeConverted() throws {
        let (dir, flv, run) = try recordPhoneAudio(seconds: 6, sourceChannels: 2)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertTrue(warnings.contains { $0.contains("passthrough: the audio is not a network source's own AAC") }, "\(warnings)")
        XCTAssertFalse(warnings.contains { $0.contains("did not decode") }, "\(warnings)")
        let sent = try Self.packetHashes(flv, stream: "0:a:0").count
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" && $0["node"] as? String == "audio" })
        XCTAssertEqual(account["passed"] as? Int, 0)
        XCTAssertEqual(Double(account["encoded"] as? Int ?? 0), Double(sent), accuracy: 2, "every frame encoded")

        let probe = try CLI.probe(dir + "/out.mp4")
        XCTAssertEqual(CLI.stream(probe, "audio")?["channels"] as? Int, 2)
        // The phone's 440 Hz tone, whole: no frame lost or garbled.
        func level(_ path: String) throws -> (rms: Double, peak: Double) {
            let out = try Tool.run(["ffmpeg", "-v", "info", "-i", path, "-map", "0:a", "-ac", "1", "-af", "astats=measure_overall=RMS_level+Peak_level:measure_perchannel=0",
                                    "-f", "null", "-"])
            func value(_ name: String) -> Double {
                out.stderr.split(separator: "\n").last { $0.contains(name) }.flatMap { Double($0.split(separator: ":").last!.trimmingCharacters(in: .whitespaces)) } ?? .nan
            }
            return (value("RMS level dB"), value("Peak level dB"))
        }
        let (a, b) = (try level(flv), try level(dir + "/out.mp4"))
        // Mono spread to stereo may lower the level by 3 dB; the tone's crest (peak over RMS) stays a sine's.
        XCTAssertEqual(b.rms, a.rms, accuracy: 3.5, "the phone's tone, not silence")
        XCTAssertEqual(b.peak - b.rms, a.peak - a.rms, accuracy: 0.5, "no click from a frame decoded out of turn")
    }

    /// The phone's clip (mono AAC) published to `h264` and `aac` with `passthrough: auto`, the
    /// source declaring `sourceChannels`; the recording is `dir`/out.mp4, the run ended.
    func recordPhoneAudio(seconds: Int, sourceChannels: Int) throws -> (dir: String, flv: String, run: BackgroundRun) {
        let (dir, flv, port, _) = try Self.phoneScene(seconds: seconds)
        CLI.write("""
        pipeline: aac-passthrough
        nodes:
          src:   {type: rtmp, listen: true, idle: 2s, size: 720x1280, audio-channels: \(sourceChannels), url: "rtmp://127.0.0.1:\(port)/live/phone"}
          video: {type: h264, in: src.video, passthrough: auto, preset: ultrafast}
          audio: {type: aac, in: src.audio, passthrough: auto}
          out:   {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone"], timeout: 40)
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        return (dir, flv, run)
    }

    /// Decoded pictures (gray, small): every one in `spans` is the same card, hiding the
    /// publisher's picture; every other decodes exactly as the publisher's.
    static func assertCardSpans(shown: [[UInt8]], original: [[UInt8]], spans: [(Int, Int)], file: StaticString = #filePath, line: UInt = #line) {
        let inSpan = { (k: Int) in spans.contains { k >= $0.0 && k < $0.1 } }
        var worstCard = 0.0, worstSource = 0.0
        for k in 0..<min(shown.count, original.count) {
            if inSpan(k) {
                worstCard = max(worstCard, meanDistance(shown[k], shown[spans[0].0]))
                XCTAssertGreaterThan(meanDistance(shown[k], original[k]), 8, "picture \(k) is hidden", file: file, line: line)
            } else {
                worstSource = max(worstSource, meanDistance(shown[k], original[k]))
            }
        }
        XCTAssertLessThan(worstCard, 2, "every picture in a span is the same card", file: file, line: line)
        XCTAssertEqual(worstSource, 0, "the publisher's pictures decode exactly as sent", file: file, line: line)
    }

    /// Decoded pictures (gray, small): each the phone's picture at its place (testsrc2 moves
    /// every picture: a picture decoded from the wrong packets, or out of order, is far off).
    static func assertPhonePicturesInPlace(shown: [[UInt8]], original: [[UInt8]], file: StaticString = #filePath, line: UInt = #line) {
        let distances = zip(shown, original).map { meanDistance($0, $1) }
        let neighbours = zip(shown.dropFirst(), original).map { meanDistance($0, $1) }
        XCTAssertLessThan(distances.max() ?? .infinity, 4, "every picture is the phone's", file: file, line: line)
        XCTAssertGreaterThan(neighbours.reduce(0, +) / Double(max(neighbours.count, 1)), (distances.reduce(0, +) / Double(max(distances.count, 1))) * 2,
                             "and at its own place: the next one is further off", file: file, line: line)
    }

    /// Bytes of pictures `node` emitted on its video output over the run (its last `stats`): 0
    /// when every picture left it undecoded, as its packet alone.
    static func videoBytes(_ run: BackgroundRun, node: String) -> Int? { emittedBytes(run, node: node, output: 0) }

    /// The same for its audio output: what the source decoded of the audio.
    static func audioBytes(_ run: BackgroundRun, node: String) -> Int? { emittedBytes(run, node: node, output: 1) }

    private static func emittedBytes(_ run: BackgroundRun, node: String, output: Int) -> Int? {
        let stats = run.events.last { $0["event"] as? String == "stats" }
        let entry = (stats?["nodes"] as? [[String: Any]])?.first { $0["node"] as? String == node }
        return (entry?["bytes"] as? [Int]).flatMap { $0.indices.contains(output) ? $0[output] : nil }
    }

    /// An encoder that cannot splice (`h265 passthrough: auto` fed the phone's H.264) encodes every
    /// picture, at its own size (the source's `size`, the phone's pictures scaled to it): the
    /// source, which decodes nothing itself (no node reads every picture), decodes each on the
    /// encoder's request, in order from each keyframe, and the recording shows the phone's pictures.
    /// Queues that block: x265 encodes every picture, and beside other suites it fell behind.
    func testPicturesDecodedOnRequestWhenTheEncoderCannotSplice() throws {
        let seconds = 6
        let (dir, flv, port, assets) = try Self.phoneScene(seconds: seconds)
        CLI.write("""
        pipeline: passthrough-refused
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, size: 360x640, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png, queue: {size: 60, policy: block}}
          video:   {type: h265, in: privacy, passthrough: auto, crf: 18, queue: {size: 60, policy: block}}
          out:     {type: file, in: [video], path: out.mp4}
        """, to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone"], timeout: 40)
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        XCTAssertEqual(warnings.filter { $0.contains("passthrough") }.count, 1, "\(warnings)")
        XCTAssertTrue(warnings.contains { $0.contains("the source sends h264, not HEVC") }, "\(warnings)")
        XCTAssertEqual(Self.videoBytes(run, node: "src"), 0, "the source decoded no picture itself")
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        XCTAssertEqual(account["passed"] as? Int, 0)
        XCTAssertEqual(account["encoded"] as? Int, seconds * 30)

        let probe = try CLI.probe(dir + "/out.mp4")
        XCTAssertEqual(CLI.stream(probe, "video")?["width"] as? Int, 360)
        XCTAssertEqual(CLI.stream(probe, "video")?["height"] as? Int, 640)
        let shown = try HlsWitness.grayPictures(dir + "/out.mp4", width: 90, height: 160)
        let original = try HlsWitness.grayPictures(flv, width: 90, height: 160)
        XCTAssertEqual(shown.count, original.count, "every picture recorded")
        // Each the phone's picture at its place (testsrc2 moves every picture: a picture decoded
        // from the wrong packets, or out of order, is far off).
        Self.assertPhonePicturesInPlace(shown: shown, original: original)
    }

    /// What cannot splice is refused by `check`, naming the option.
    func testCheckRefusesWhatCannotSplice() throws {
        let dir = CLI.scratch()
        for (extra, words) in [("bframes: 2", "no B-frames"), ("keyframes: fixed", "cannot also be fixed"), ("tune: film", "zerolatency tuning")] {
            CLI.write("""
            pipeline: refused
            nodes:
              src:   {type: rtmp, listen: true, size: 720x1280, url: "rtmp://127.0.0.1:1935/live/phone"}
              video: {type: h264, in: src.video, passthrough: auto, \(extra)}
              out:   {type: file, in: [video], path: out.mp4}
            """, to: dir + "/refused.pipe")
            let check = try CLI.run(["check", dir + "/refused.pipe"])
            XCTAssertEqual(check.status, 1, extra)
            XCTAssertTrue((check.stdout + check.stderr).contains(words), "\(extra): \(check.stdout) \(check.stderr)")
        }
    }

    /// The same splice pushed over RTMP into nginx-rtmp and written as HLS: one sequence header
    /// (one init segment) holds both encoders' parameter sets, so what nginx records and the HLS
    /// rendition are the publisher's packets with our card spans between, and players decode
    /// across every splice; both at the phone's size, which no option told.
    func testPushedToNginxRtmpAndHlsThePlayersDecodeAcrossEverySplice() throws {
        try XCTSkipUnless(NginxRtmp.isAvailable, "nginx with libnginx-mod-rtmp is not installed (scripts/setup installs it)")
        let seconds = 16
        let (dir, flv, port, assets) = try Self.phoneScene(seconds: seconds)
        let nginx = try NginxRtmp()
        CLI.write("""
        pipeline: passthrough-push
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png}
          video:   {type: h264, in: privacy, passthrough: auto, preset: ultrafast, queue: {size: 60}}
          audio:   {type: aac, in: src.audio}
          live:    {type: rtmp, in: [video, audio], url: "\(nginx.url("spliced"))"}
          hls:     {type: hls, in: [video, audio], path: hls/master.m3u8, segment: 2s, window: all}
        """, to: dir + "/p.pipe")
        let run = try startListening(dir + "/p.pipe", in: dir)
        let switches = [(90, 200), (260, 330)]
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone"]
            + switches.flatMap { ["--privacy", "\($0.0 * 100 / 3)ms:\(($0.1 - $0.0) * 100 / 3)ms"] }, timeout: 60)
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let recorded = try XCTUnwrap(nginx.sessions.last, "nginx recorded nothing")
        try Self.assertSpliced(recorded, source: flv, switches: switches, pictures: seconds * 30)
        try assertPlaysEverywhere(recorded, pictures: seconds * 30, browser: false)
        // The hls sink: one rendition, the phone's own, cut at its keyframes (fMP4 segments).
        let playlist = dir + "/hls/1280p/index.m3u8"
        try Self.assertSpliced(playlist, source: flv, switches: switches, pictures: seconds * 30)
        XCTAssertEqual(try HlsWitness.decode(playlist).errors, "", "ffmpeg plays the HLS across every splice")
        // No size told (the source expects 1280x720): the push, the rendition (named after the
        // height the phone sends) and the master playlist are the phone's 720x1280.
        for path in [recorded, playlist] {
            let video = try XCTUnwrap(CLI.stream(try CLI.probe(path), "video"), path)
            XCTAssertEqual("\(video["width"] as? Int ?? 0)x\(video["height"] as? Int ?? 0)", "720x1280", path)
        }
        XCTAssertTrue(try String(contentsOfFile: dir + "/hls/master.m3u8", encoding: .utf8).contains("RESOLUTION=720x1280"))
    }

    /// Packets: the recording's picture k is the publisher's picture k; every picture outside
    /// the card spans is the publisher's packet, byte for byte, and the spans run from each
    /// switch on to the publisher's first keyframe after it went off. Returns the spans.
    /// `hashes`: one per video packet in decode order (another framing's: its slices' hashes).
    @discardableResult
    static func assertSpliced(_ recording: String, source flv: String, switches: [(Int, Int)], pictures: Int,
                              hashes: (String) throws -> [String] = { try packetHashes($0) },
                              file: StaticString = #filePath, line: UInt = #line) throws -> [(Int, Int)] {
        let sent = try hashes(flv), recorded = try hashes(recording)
        XCTAssertEqual(sent.count, pictures, file: file, line: line)
        XCTAssertEqual(recorded.count, sent.count, "every picture recorded, none repeated", file: file, line: line)
        let sourceKeys = try keyframeIndices(flv)
        let expected = switches.map { on, off in (on, sourceKeys.first { $0 >= off } ?? pictures) }
        var ours: [(Int, Int)] = []
        for k in 0..<min(sent.count, recorded.count) where recorded[k] != sent[k] {
            if let last = ours.last, last.1 == k { ours[ours.count - 1].1 = k + 1 } else { ours.append((k, k + 1)) }
        }
        XCTAssertEqual(ours.map { "\($0.0)..<\($0.1)" }, expected.map { "\($0.0)..<\($0.1)" },
                       "encoded spans: from each switch on to the source's first keyframe after it went off", file: file, line: line)
        for (span, (on, off)) in zip(expected, switches) {
            print("passthrough: card on at picture \(on), off at \(off), source keyframe at \(span.1): overstay \(Double(span.1 - off) / 30) s")
        }
        let recordedKeys = Set(try keyframeIndices(recording))
        for span in expected { XCTAssertTrue(recordedKeys.contains(span.0), "our span at \(span.0) starts with a keyframe", file: file, line: line) }
        return expected
    }

    /// ffmpeg decodes it with no error at all, GStreamer's decodebin3 plays it through, and
    /// Chromium's <video> plays it to the end with every picture decoded.
    func assertPlaysEverywhere(_ path: String, pictures: Int, browser: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws {
        let ffmpeg = try Tool.run(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"])
        XCTAssertEqual(ffmpeg.status, 0, ffmpeg.stderr, file: file, line: line)
        XCTAssertEqual(ffmpeg.stderr.trimmingCharacters(in: .whitespacesAndNewlines), "", "ffmpeg decodes without an error", file: file, line: line)
        let gst = try Tool.run(["gst-launch-1.0", "-q", "playbin3", "uri=file://" + path, "video-sink=fakesink sync=false",
                                "audio-sink=fakesink sync=false"], timeout: 60)
        XCTAssertEqual(gst.status, 0, gst.stdout + gst.stderr, file: file, line: line)
        XCTAssertFalse((gst.stdout + gst.stderr).contains("ERROR"), gst.stdout + gst.stderr, file: file, line: line)
        guard browser else { return }
        let page = (path as NSString).deletingLastPathComponent + "/play.html"
        try "<video id=v muted src=\"\((path as NSString).lastPathComponent)\"></video>".write(toFile: page, atomically: true, encoding: .utf8)
        let seen = try XCTUnwrap(PythonWitness.run(OperatorPageTests.chromium + #"""
d.get("file://" + sys.argv[1])
d.execute_script("const v = document.getElementById('v'); window.done = null; v.onended = () => window.done = 'ended'; v.onerror = () => window.done = 'error ' + v.error.code; v.playbackRate = 8; v.play();")
state = until(lambda: d.execute_script("return window.done"), 30)
v = d.execute_script("const v = document.getElementById('v'); const q = v.getVideoPlaybackQuality(); return {time: v.currentTime, duration: v.duration, decoded: v.webkitDecodedFrameCount, total: q.totalVideoFrames, error: v.error && v.error.code};")
v["state"] = state
print(json.dumps(v))
d.quit()
"""#, [page]) as? [String: Any], file: file, line: line)
        print("chromium <video>: \(seen)")
        XCTAssertEqual(seen["state"] as? String, "ended", "\(seen)", file: file, line: line)
        XCTAssertTrue(seen["error"] is NSNull || seen["error"] == nil, "\(seen)", file: file, line: line)
        XCTAssertGreaterThanOrEqual(seen["decoded"] as? Int ?? 0, pictures - 2, "\(seen)", file: file, line: line)
    }
}

extension XCTestCase {
    /// `avgraph run` of `pipe` in `dir`, once its rtmp source listens (stopped at teardown).
    func startListening(_ pipe: String, in dir: String) throws -> BackgroundRun {
        var env = ProcessInfo.processInfo.environment
        env["AVGRAPH_KEYS"] = nil
        let run = try BackgroundRun(["run", pipe, "--events", "json"], cwd: dir, environment: env)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        return run
    }
}
