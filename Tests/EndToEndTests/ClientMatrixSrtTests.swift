import AVGraphTesting
import AVGraphTransport
import Foundation
import XCTest

/// The SRT rows of the client matrix: publishers nobody here wrote (ffmpeg's libsrt output,
/// GStreamer's `srtsink`, libsrt's own srt-live-transmit) each publish the same 6 s flash-and-beep
/// clip to avgraph's `srt` listener. Each row: 6 +- 0.2 s of video and of audio recorded, every
/// flash within 20 ms of its beep, the publisher's exit status 0. And the stream id in SRT's
/// access-control form (`#!::r=...,m=...,u=...`) as those clients send it.
final class ClientMatrixSrtTests: XCTestCase {
    /// The 6 s clip, and the same as MPEG-TS (what GStreamer publishes as it is).
    func clip(_ dir: String) throws -> (mp4: String, ts: String) {
        let mp4 = dir + "/clip.mp4", ts = dir + "/clip.ts"
        try FlashBeep.makeClip(mp4, seconds: 6)
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-i", mp4, "-c", "copy", "-f", "mpegts", ts])
        return (mp4, ts)
    }

    /// GStreamer paces the TS by its PCR (`tsparse set-timestamps`, `srtsink` synced on the clock)
    /// and ends at its end (EOS: `gst-launch-1.0` exits 0).
    /// Refused, `srtsink` calls again for ever: `within` bounds it (then it is killed).
    static func gstreamer(_ ts: String, port: Int, streamID: String?, within: Double = 30) throws -> Int32 {
        var sink = ["srtsink", "uri=srt://127.0.0.1:\(port)?mode=caller", "sync=true"]
        if let streamID { sink.append("streamid=\(streamID)") }
        let p = try PublisherVanishTests.spawn("gst-launch-1.0", ["-q", "filesrc", "location=\(ts)", "!", "tsparse", "set-timestamps=true", "!"] + sink)
        let end = Date().addingTimeInterval(within)
        while p.isRunning && Date() < end { usleep(20_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// One row: `publish` (given the port) publishes the clip; its status and the recording judged.
    func row(_ name: String, source extra: String = "", publish: (Int, (mp4: String, ts: String)) throws -> Int32) throws {
        let dir = CLI.scratch("matrix-srt-\(name)")
        let media = try clip(dir)
        let port = try LoopbackPort.free()
        let run = try PublisherVanishTests.start(self, dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true\(extra)", idle: "2s")
        XCTAssertEqual(try publish(port, media), 0, "\(name): the publisher's exit status")
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        let said = PublisherVanishTests.said(run)
        XCTAssertFalse(said.contains("corrupt") || said.contains("mismatch"), "\(name): no damaged packet: \(said)")
        let path = dir + "/out.mp4"
        let d = try RecordingEndTests.durations(path)
        let m = try FlashBeep.measure(path)
        print("client matrix, SRT, \(name): video \(d.video) s, audio \(d.audio) s, flash - beep ms \(m.offsets.map { Int(($0 * 1000).rounded()) })")
        XCTAssertEqual(d.video, 6, accuracy: 0.2, "\(name): seconds of video")
        XCTAssertEqual(d.audio, 6, accuracy: 0.2, "\(name): seconds of audio")
        FlashBeep.assertInSync(m, atLeast: 5)
    }

    func testFFmpegSrt() throws {
        try row("ffmpeg") { port, media in
            try NetworkIngestTests.publish(["-re", "-i", media.mp4, "-c", "copy", "-f", "mpegts", "srt://127.0.0.1:\(port)?mode=caller"])
        }
    }

    /// GStreamer sends in bursts: 0.5-0.8 s of media every ~0.8 s (srtsink paced by the TS's
    /// PCR), the first at once. Each gap looks like a publisher gone silent and each burst comes
    /// up to 0.7 s behind the clock. Recorded whole since the source no longer lets a late
    /// burst's sound end the silence while its pictures still catch up, hands late pictures on
    /// one at a time, and leaves the silence's edge where the mark put it (before: the first beep
    /// or the flashes at 0.5/1.5 s lost in most runs, 16-24 pictures dropped at `resize`). Its
    /// last half second, once taken for srtsink's own loss, was libsrt's receive buffer at the
    /// close (see SrtListener).
    func testGStreamerSrtsink() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: "/usr/bin/gst-launch-1.0"), "GStreamer is not installed (scripts/setup installs it)")
        try row("gstreamer-srtsink") { port, media in try Self.gstreamer(media.ts, port: port, streamID: nil) }
    }

    /// A phone turned twice over SRT (ffmpeg sending the turned H.264 as MPEG-TS: each part's SPS
    /// and PPS at its keyframe, no other signal of the new size), recorded whole at 1280x720: all
    /// 180 pictures. (It was 177 and 5.9 s of each track while the listener ended a session at
    /// its close: libsrt hands a packet over only at its play time, so the last 120 ms of
    /// latency were still in its buffer.)
    func testPhoneTurnedTwiceOverSrtIsRecordedWholeAt1280x720() throws {
        let dir = CLI.scratch("matrix-srt-turned")
        let media = try clip(dir)
        try ClientMatrixRtmpTests.turnedParts(dir, hevc: false)
        let port = try LoopbackPort.free()
        let run = try PublisherVanishTests.start(self, dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true", idle: "2s")
        let sent = ["-framerate", "30", "-f", "h264", "-i", dir + "/turned.es", "-i", media.mp4, "-map", "0:v", "-map", "1:a", "-c", "copy", "-t", "6"]
        // The witness: what the same command sends, written to a file, so the test knows where each track of it ends.
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y"] + sent + [dir + "/sent.mp4"])
        let witness = try RecordingEndTests.durations(dir + "/sent.mp4")
        XCTAssertEqual(try NetworkIngestTests.publish(["-re"] + sent.prefix(6) + ["-re"] + sent.dropFirst(6) + ["-f", "mpegts",
                                                       "srt://127.0.0.1:\(port)?mode=caller"]), 0, "ffmpeg's exit status")
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        try ClientMatrixRtmpTests.assertTurnedTwice(dir + "/out.mp4", "srt")
        let d = try RecordingEndTests.durations(dir + "/out.mp4")
        print("turned srt: video \(d.video) s, audio \(d.audio) s; sent: video \(witness.video) s, audio \(witness.audio) s")
        XCTAssertEqual(d.video, witness.video, accuracy: 0.04, "the last pictures sent before the close")
        // The witness MP4 hides AAC's 1024-sample priming (21 ms) behind an edit list; MPEG-TS carries
        // it, and the decoder gives it back as sound: the recording's audio may end that and one more
        // AAC frame later (6.049 s here; the RTMP rows' 6.050). Losing the last 120 ms was 5.9 s.
        XCTAssertEqual(d.audio, witness.audio + 0.03, accuracy: 0.03, "the last sound sent before the close")
    }

    /// App audio that changes its rate and channels mid-session (44.1 kHz stereo, 48 kHz mono, 44.1
    /// kHz stereo, 2 s each, a 440 Hz tone) through the network source: ffmpeg publishes the three
    /// parts joined as one MPEG-TS over SRT. Each part was encoded on its own, so the stream itself
    /// has a hole at each join (AAC's priming, ~25-40 ms): ffmpeg's own decode of the same file is
    /// the witness, and around each change the recording is quiet no longer than it is there.
    func testAudioChangingRateAndChannelsMidSessionHasNoHoleBeyondTheStreamsOwn() throws {
        let dir = CLI.scratch("srt-audio-change")
        for (k, shape) in [(44100, 2), (48000, 1), (44100, 2)].enumerated() {
            _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=f=440:r=\(shape.0):d=2", "-ac", "\(shape.1)",
                               "-c:a", "aac", "-b:a", "128k", "-output_ts_offset", "\(2 * k)", "-f", "mpegts", dir + "/part\(k).ts"])
        }
        var joined = Data()
        for k in 0..<3 { joined.append(try Data(contentsOf: URL(fileURLWithPath: dir + "/part\(k).ts"))) }
        try joined.write(to: URL(fileURLWithPath: dir + "/joined.ts"))
        let port = try LoopbackPort.free()
        let run = try PublisherVanishTests.start(self, dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true", idle: "2s")
        XCTAssertEqual(try NetworkIngestTests.publish(["-re", "-i", dir + "/joined.ts", "-c", "copy", "-f", "mpegts",
                                                       "srt://127.0.0.1:\(port)?mode=caller"]), 0, "ffmpeg's exit status")
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        /// The longest run of quiet 5 ms windows (RMS under 0.05; the tone's is 0.088) within 0.3 s of `t`.
        func quiet(_ x: [Float], near t: Double) -> Int {
            let w = 240
            var longest = 0, current = 0
            for i in max(0, Int((t - 0.3) * 200))..<min(x.count / w, Int((t + 0.3) * 200)) {
                let rms = (x[(i * w)..<(i * w + w)].reduce(0) { $0 + $1 * $1 } / Float(w)).squareRoot()
                current = rms < 0.05 ? current + 1 : 0
                longest = max(longest, current)
            }
            return longest
        }
        let source = try CLI.samples(dir + "/joined.ts", rate: 48000), recorded = try CLI.samples(dir + "/out.mp4", rate: 48000)
        // The recording starts where its first sound came: the source's time 1.4 s (MPEG-TS's offset) is its 0.
        let start = Double(try XCTUnwrap(source.firstIndex { abs($0) > 0.05 })) / 48000
        let recordedStart = Double(try XCTUnwrap(recorded.firstIndex { abs($0) > 0.05 })) / 48000
        var figures: [String] = []
        for change in [2.0, 4.0] {
            let own = quiet(source, near: start + change), ours = quiet(recorded, near: recordedStart + change)
            figures.append("at \(Int(change)) s: \(ours * 5) ms quiet (the stream's own decode: \(own * 5) ms)")
            XCTAssertLessThanOrEqual(ours, own + 1, "no hole beyond the stream's own at \(change) s")
        }
        print("audio changing 44.1k stereo -> 48k mono -> 44.1k stereo over SRT: " + figures.joined(separator: ", ")
              + "; \(String(format: "%.3f", Double(recorded.count) / 48000)) s recorded of \(String(format: "%.3f", Double(source.count) / 48000)) s")
        XCTAssertEqual(Double(recorded.count) / 48000, Double(source.count) / 48000, accuracy: 0.2, "the sound recorded whole")
    }

    func testSrtLiveTransmit() throws {
        try row("srt-live-transmit") { port, media in
            try PublisherVanishTests.publishWithSrtLiveTransmit(media.mp4, seconds: 6, to: "srt://127.0.0.1:\(port)")
        }
    }

    /// Stream ids in the access-control form, from GStreamer's `streamid` property and
    /// srt-live-transmit's `streamid` URI parameter: the key is `r=`; a wrong resource and a
    /// caller asking to receive (`m=request`) are refused first (srtsink calls again until it is
    /// stopped), each named by peer once, the key never printed; then the right ones are recorded.
    func testAccessControlStreamIdsFromGStreamerAndSrtLiveTransmit() throws {
        let dir = CLI.scratch()
        let media = try clip(dir)
        let port = try LoopbackPort.free()
        let run = try PublisherVanishTests.start(self, dir, source: "type: srt, url: \"srt://127.0.0.1:\(port)\", listen: true, keys: [live/phone-7f3a]",
                                                 idle: "60s")
        XCTAssertNotEqual(try Self.gstreamer(media.ts, port: port, streamID: "#!::r=live/intruder,m=publish,u=mallory", within: 2), 0, "a wrong resource")
        XCTAssertNotEqual(try Self.gstreamer(media.ts, port: port, streamID: "#!::r=live/phone-7f3a,m=request,u=viewer", within: 2), 0, "a player")
        XCTAssertEqual(try Self.gstreamer(media.ts, port: port, streamID: "#!::r=live/phone-7f3a,m=publish,u=alice"), 0)
        // The next publisher is admitted once the first has left.
        XCTAssertNotNil(run.waitFor(timeout: 10) { $0["event"] as? String == "publisher" && $0["state"] as? String == "disconnected" })
        let status = try PublisherVanishTests.publishWithSrtLiveTransmit(media.mp4, seconds: 3,
                                                                          to: "srt://127.0.0.1:\(port)?streamid=#!::u=bob,r=live/phone-7f3a,m=publish")
        XCTAssertEqual(status, 0, "srt-live-transmit's exit status")
        let end = Date().addingTimeInterval(10)
        while Date() < end, run.events.filter({ $0["event"] as? String == "publisher" && $0["state"] as? String == "disconnected" }).count < 2 {
            usleep(20_000)
        }
        run.process.interrupt()
        XCTAssertEqual(run.waitForExit(timeout: 40), 0, run.stderr)
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        print("refusals: \(warnings)")
        XCTAssertEqual(warnings.filter { $0.contains("127.0.0.1:") && $0.contains("(u=mallory)") && $0.contains("refused: unknown key") }.count, 1,
                       "\(warnings)")
        XCTAssertEqual(warnings.filter { $0.contains("127.0.0.1:") && $0.contains("m=request") && $0.contains("takes publishers") }.count, 1,
                       "\(warnings)")
        let everything = "\(run.events)\(run.stderr)"
        XCTAssertFalse(everything.contains("phone-7f3a") || everything.contains("intruder"), "no key printed")
        let states = run.events.filter { $0["event"] as? String == "publisher" }.compactMap { $0["state"] as? String }
        XCTAssertEqual(states, ["connected", "disconnected", "connected", "disconnected"], "GStreamer's then srt-live-transmit's sessions")
        let d = try RecordingEndTests.durations(dir + "/out.mp4")
        print("access-control stream ids: GStreamer 6 s + srt-live-transmit 3 s recorded as video \(d.video) s, audio \(d.audio) s")
        XCTAssertGreaterThan(d.video, 8.8, "both sessions recorded")
        XCTAssertEqual(d.video, d.audio, accuracy: 0.04)
    }
}
