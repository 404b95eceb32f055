import AVGraphTesting
import Foundation
import XCTest

/// `away:` on a network source (issue 53): a phone killed mid-broadcast and back 10 s later,
/// into a run that pushes to nginx-rtmp (h264 passthrough) and writes an HLS ladder. Every
/// output keeps its clock through the gap: the last picture held, the card from `after` on,
/// silence, and the phone's own packets byte for byte on either side of the card.
final class AwayTests: XCTestCase {
    static let seconds = 30
    static let killAt = 10.0
    static let backAt = 20.0
    /// The card's gray, far from the clip's black (and its white flashes).
    static let cardGray = 128

    func testPhoneKilledAndBackKeepsNginxAndEveryRenditionContinuousWithTheCardBetween() throws {
        try XCTSkipUnless(NginxRtmp.isAvailable, "nginx with libnginx-mod-rtmp is not installed (scripts/setup installs it)")
        let dir = CLI.scratch()
        let clip = dir + "/phone.mp4"
        try FlashBeep.makeClip(clip, seconds: Self.seconds)
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x808080:s=360x640", "-frames:v", "1", dir + "/card.png"])
        let port = try LoopbackPort.free()
        let nginx = try NginxRtmp()
        defer { nginx.stop() }
        let url = "rtmp://127.0.0.1:\(port)/live/phone"
        CLI.write("""
        pipeline: away
        nodes:
          src:     {type: rtmp, listen: true, idle: 15s, url: "\(url)", size: 720x1280, away: {after: 1s, image: card.png}}
          video:   {type: h264, in: src.video, passthrough: auto, preset: ultrafast, queue: {size: 60}}
          audio:   {type: aac, in: src.audio}
          live:    {type: rtmp, in: [video, audio], url: "\(nginx.url("away"))"}
          fit360:  {type: resize, in: src.video, size: 360x640, mode: fit}
          fit180:  {type: resize, in: src.video, size: 180x320, mode: fit}
          v360:    {type: h264, in: fit360, bitrate: 800k, gop: 60, keyframes: fixed, preset: ultrafast}
          v180:    {type: h264, in: fit180, bitrate: 300k, gop: 60, keyframes: fixed, preset: ultrafast}
          hls:     {type: hls, in: [v360, v180, audio], path: hls/master.m3u8, segment: 2s, window: all}
        """, to: dir + "/away.pipe")
        let run = try startListening(dir + "/away.pipe", in: dir)
        let start = Date()
        let first = try PublisherVanishTests.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-i", clip, "-c", "copy", "-f", "flv", url])
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        Thread.sleep(until: start.addingTimeInterval(Self.killAt))
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        Thread.sleep(until: start.addingTimeInterval(Self.backAt))
        let second = try PublisherVanishTests.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-ss", "\(Int(Self.backAt))", "-i", clip,
                                                               "-c", "copy", "-f", "flv", url])
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        second.waitUntilExit()
        XCTAssertEqual(second.terminationStatus, 0)
        // Stopped before the card would come on again: what was decoded still goes out.
        usleep(300_000)
        run.process.terminate()
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        nginx.stop()

        let away = run.events.filter { $0["event"] as? String == "away" }
        print("away events: \(away)")
        let ended = try XCTUnwrap(away.first { $0["state"] as? String == "ended" }, "an away event with the span: \(away)")
        let from = try XCTUnwrap(ended["from"] as? Double), to = try XCTUnwrap(ended["to"] as? Double)

        let recorded = try XCTUnwrap(nginx.sessions.last, "nginx recorded nothing")
        let pictures = (Self.seconds - 2) * 30
        try Self.assertContinuous(recorded, "nginx's recording", pictures: pictures)
        let span = try Self.assertCard(recorded, from: from, to: to, between: Self.killAt + 1, and: Self.backAt, "nginx's recording")
        for rendition in ["640p", "320p"] {
            let playlist = try HlsWitness.ended(dir + "/hls/\(rendition)/index.m3u8")
            try Self.assertContinuous(playlist, "rendition \(rendition)", pictures: pictures)
            try Self.assertCard(playlist, from: from, to: to, between: Self.killAt + 1, and: Self.backAt, "rendition \(rendition)")
        }
        try Self.assertPhonePacketsAround(recorded, clip: clip, span: span)
    }

    /// Every video timestamp within a frame (and a rounding) of the one before, every audio
    /// packet where the one before ended; prints the largest steps.
    static func assertContinuous(_ path: String, _ what: String, pictures: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        func steps(_ stream: String) throws -> (largest: Double, at: Double, count: Int) {
            let out = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time,duration_time",
                                     "-of", "csv=p=0", path])
            let rows = out.split(separator: "\n").map { $0.split(separator: ",").compactMap { Double($0) } }.filter { $0.count == 2 }
            let sorted = rows.sorted { $0[0] < $1[0] }
            var largest = (0.0, 0.0)
            for (a, b) in zip(sorted, sorted.dropFirst()) where b[0] - (a[0] + a[1]) > largest.0 { largest = (b[0] - (a[0] + a[1]), a[0]) }
            return (largest.0, largest.1, sorted.count)
        }
        let video = try steps("v:0"), audio = try steps("a:0")
        print("\(what): \(video.count) video packets, largest hole \(ms(video.largest)) ms at \(String(format: "%.3f", video.at)) s; "
              + "\(audio.count) audio packets, largest hole \(ms(audio.largest)) ms at \(String(format: "%.3f", audio.at)) s")
        XCTAssertGreaterThan(video.count, pictures, "\(what): pictures all through", file: file, line: line)
        XCTAssertLessThanOrEqual(video.largest, 1.0 / 30 + 0.002, "\(what): no video timestamp gap over a frame", file: file, line: line)
        XCTAssertLessThanOrEqual(audio.largest, 0.002, "\(what): audio continuous", file: file, line: line)
    }

    static func ms(_ s: Double) -> String { String(format: "%.1f", s * 1000) }

    /// The pictures in the card's gray: one span, from about `expectedFrom` (`after` past the
    /// publisher's last media) to `expectedTo` (its return), where the `away` event says. Returns the
    /// span (picture indices, decode order).
    @discardableResult
    static func assertCard(_ path: String, from: Double, to: Double, between expectedFrom: Double, and expectedTo: Double, _ what: String,
                           file: StaticString = #filePath, line: UInt = #line) throws -> Range<Int> {
        let times = try CLI.videoFrameTimes(path)
        let pictures = try HlsWitness.grayPictures(path, width: 16, height: 16)
        let start = times.first ?? 0
        let card = pictures.indices.filter { k in
            let p = pictures[k]
            return p.allSatisfy { abs(Int($0) - cardGray) <= 12 }
        }
        let first = try XCTUnwrap(card.first, "\(what): no picture shows the card", file: file, line: line)
        let last = card.last!
        let t0 = times[first] - start, t1 = times[last] - start
        print("\(what): card on pictures \(first)...\(last) (\(card.count)), \(String(format: "%.3f", t0)) s to \(String(format: "%.3f", t1)) s; "
              + "the away event: \(from) s to \(to) s")
        XCTAssertEqual(card.count, last - first + 1, "\(what): the card in one span", file: file, line: line)
        XCTAssertEqual(t0, expectedFrom, accuracy: 0.7, "\(what): the card from `after` past the last media", file: file, line: line)
        XCTAssertEqual(t1, expectedTo, accuracy: 1.5, "\(what): the card until the return", file: file, line: line)
        XCTAssertEqual(t0, from, accuracy: 0.05, "\(what): where the event says it began", file: file, line: line)
        XCTAssertEqual(t1, to - 1.0 / 30, accuracy: 0.05, "\(what): where the event says it ended", file: file, line: line)
        return first..<(last + 1)
    }

    /// Before the span of our pictures (the held picture and the card) the recording is the
    /// first session's packets, after it the second's from its first keyframe, byte for byte.
    static func assertPhonePacketsAround(_ recorded: String, clip: String, span card: Range<Int>,
                                         file: StaticString = #filePath, line: UInt = #line) throws {
        let sent = try PassthroughTests.packetHashes(clip), got = try PassthroughTests.packetHashes(recorded)
        let before = zip(sent, got).prefix { $0 == $1 }.count
        // The second publisher (`-ss` with stream copy) starts at the clip's keyframe at or before the return.
        let keyframes = try PassthroughTests.keyframeIndices(clip)
        let resumed = try XCTUnwrap(keyframes.last { $0 <= Int(backAt) * 30 }, "a keyframe before the return", file: file, line: line)
        let after = zip(sent[resumed...], got[card.upperBound...]).prefix { $0 == $1 }.count
        let ours = card.upperBound - before
        print("passthrough: \(before) phone packets, then \(ours) of ours (held and card, \(card.count) of them the card), "
              + "then \(after) phone packets from its picture \(resumed); \(got.count) in all")
        XCTAssertEqual(card.upperBound + after, got.count, "after the card, every packet is the phone's", file: file, line: line)
        XCTAssertGreaterThan(before, Int(killAt - 1) * 30, "the first session's packets up to the kill", file: file, line: line)
        XCTAssertLessThanOrEqual(card.lowerBound - before, 36, "our pictures start at most `after` and a frame before the card",
                                 file: file, line: line)
        XCTAssertGreaterThanOrEqual(card.lowerBound - before, 20, "the last picture held about `after`", file: file, line: line)
        XCTAssertGreaterThan(after, Int(Double(seconds) - backAt - 1) * 30, "the second session's packets to its end", file: file, line: line)
    }

    /// An RTMP phone that freezes at 4 s (SIGSTOP: its connection stays open) and is taken as
    /// gone at its `timeout` (2 s), while the card already shows: what the decoder still held of
    /// it comes out at that verdict and is dropped, not taken as a return that would end the card
    /// early (and leave a hole of `after` before the next one). It comes back at 9 s; the
    /// recording (decoded, resized, encoded) is continuous, the card on from 5 s to the return.
    func testStalledPublisherTakenAsGoneKeepsOneCardSpanToItsReturn() throws {
        let dir = CLI.scratch()
        let clip = dir + "/phone.mp4"
        try FlashBeep.makeClip(clip, seconds: 12)
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=0x808080:s=360x640", "-frames:v", "1", dir + "/card.png"])
        let port = try LoopbackPort.free()
        let url = "rtmp://127.0.0.1:\(port)/live/phone"
        CLI.write("""
        pipeline: away-stall
        nodes:
          src:     {type: rtmp, listen: true, idle: 15s, timeout: 2s, url: "\(url)", away: {after: 1s, image: card.png}}
          fit:     {type: resize, in: src.video, size: 180x320, mode: fit}
          video:   {type: h264, in: fit, preset: ultrafast}
          audio:   {type: aac, in: src.audio}
          out:     {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/away.pipe")
        let run = try startListening(dir + "/away.pipe", in: dir)
        let start = Date()
        let first = try PublisherVanishTests.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-i", clip, "-c", "copy", "-f", "flv", url])
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        Thread.sleep(until: start.addingTimeInterval(4))
        kill(first.processIdentifier, SIGSTOP)
        Thread.sleep(until: start.addingTimeInterval(7))
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        Thread.sleep(until: start.addingTimeInterval(9))
        let second = try PublisherVanishTests.spawn("ffmpeg", ["-v", "error", "-nostdin", "-re", "-ss", "9", "-i", clip, "-c", "copy", "-f", "flv", url])
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        second.waitUntilExit()
        usleep(300_000)
        run.process.terminate()
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let away = run.events.filter { $0["event"] as? String == "away" }
        print("away events: \(away)")
        XCTAssertEqual(away.compactMap { $0["state"] as? String }, ["started", "ended"], "one card span")
        let ended = try XCTUnwrap(away.first { $0["state"] as? String == "ended" })
        let from = try XCTUnwrap(ended["from"] as? Double), to = try XCTUnwrap(ended["to"] as? Double)
        try Self.assertContinuous(dir + "/out.mp4", "the recording", pictures: 10 * 30)
        try Self.assertCard(dir + "/out.mp4", from: from, to: to, between: 5, and: 9, "the recording")
    }

    /// The operator page lists the span as it happens: "publisher away" when the card comes on,
    /// "publisher back" with its span when the phone returns (Debian's chromium, as
    /// OperatorPageTests drives it).
    func testOperatorPageListsTheAwaySpan() throws {
        let dir = CLI.scratch()
        let clip = dir + "/phone.mp4"
        try FlashBeep.makeClip(clip, seconds: 12)
        let port = try LoopbackPort.free(), http = try LoopbackPort.free()
        let url = "rtmp://127.0.0.1:\(port)/live/phone"
        CLI.write("""
        pipeline: away-page
        nodes:
          src:     {type: rtmp, listen: true, idle: 15s, url: "\(url)", away: {after: 1s}}
          video:   {type: h264, in: src.video, passthrough: auto, preset: ultrafast}
          out:     {type: null, in: [video, src.audio]}
        """, to: dir + "/away.pipe")
        var env = ProcessInfo.processInfo.environment
        env["AVGRAPH_KEYS"] = nil
        let run = try BackgroundRun(["run", dir + "/away.pipe", "--events", "json", "--http", "127.0.0.1:\(http)"], cwd: dir, environment: env)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        // The phone: 5 s, killed, back 4 s later for 2 s (in the background while the page watches).
        let phone = try PublisherVanishTests.spawn("bash", ["-c", """
            ffmpeg -v error -nostdin -re -i '\(clip)' -c copy -f flv '\(url)' & p=$!; sleep 5; kill -9 $p
            sleep 4; ffmpeg -v error -nostdin -re -ss 9 -i '\(clip)' -t 2 -c copy -f flv '\(url)'
            """])
        defer { if phone.isRunning { kill(phone.processIdentifier, SIGKILL) } }
        let seen = try XCTUnwrap(PythonWitness.run(OperatorPageTests.chromium + #"""
        d.get(sys.argv[1])
        text = lambda: d.find_element(By.ID, "warnings").text
        until(lambda: "publisher back" in text(), 25)
        print(json.dumps({"warnings": text(), "console": [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]}))
        d.quit()
        """#, ["http://127.0.0.1:\(http)/"]) as? [String: Any])
        phone.waitUntilExit()
        run.process.terminate()
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let warnings = seen["warnings"] as? String ?? ""
        print("the operator page's list: \(warnings.replacingOccurrences(of: "\n", with: " | "))")
        XCTAssertTrue(warnings.contains("src: publisher away: the card shows from"), warnings)
        XCTAssertTrue(warnings.contains("src: publisher back: the card showed"), warnings)
        XCTAssertEqual(seen["console"] as? [String] ?? ["?"], [], "no error on the page")
    }

    /// A bad `away` is refused by check, at its place in the file.
    func testCheckRefusesABadAwayAtItsPlace() throws {
        let dir = CLI.scratch()
        for (value, column, words) in [("{after: 1s, image: missing.png}", 80, "cannot read the away card"),
                                       ("{aftr: 1s}", 87, "unknown key 'aftr'"),
                                       ("{after: 0s}", 88, "'0s' is out of range (0.1s..3600s)")] {
            CLI.write("""
            nodes:
              src:   {type: rtmp, listen: true, url: "rtmp://127.0.0.1:1935/live/k", away: \(value)}
              out:   {type: null, in: [src.video, src.audio]}
            """, to: dir + "/bad.pipe")
            let r = try CLI.run(["check", dir + "/bad.pipe"])
            XCTAssertEqual(r.status, 1, value)
            print("check of away: \(value): \(r.stdout)")
            XCTAssertTrue(r.stdout.contains("bad.pipe:2:\(column): error:") && r.stdout.contains(words), "\(value): \(r.stdout)")
        }
    }
}
