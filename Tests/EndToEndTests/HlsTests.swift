import Foundation
import XCTest

/// The `hls` sink, read back as a player would (issue 25): the ladder's master playlist and its
/// four renditions, segment lengths and keyframes, the sliding window, the EVENT playlist's end
/// after SIGINT, kill -9 leaving only whole segments named, privacy in every rendition at once.
final class HlsTests: XCTestCase {
    typealias W = HlsWitness

    func testLadderPipeWritesFourAlignedRenditionsOfTenSeconds() throws {
        let dir = CLI.scratch()
        let master = dir + "/ladder/master.m3u8"
        let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/ladder.pipe", "--duration", "10s", "--set", "out.path=\(master)"])
        XCTAssertEqual(r.status, 0, r.stderr)

        // ffprobe reads the master playlist as four programs of the declared sizes.
        let probe = try CLI.probe(master)
        let sizes = CLI.streams(probe).filter { $0["codec_type"] as? String == "video" }.map { "\($0["width"]!)x\($0["height"]!)" }
        XCTAssertEqual(sizes, ["1920x1080", "1280x720", "854x480", "640x360"])
        let variants = try W.variants(master)
        XCTAssertEqual(variants.map(\.resolution), ["1920x1080", "1280x720", "854x480", "640x360"])
        for v in variants {
            for attribute in ["BANDWIDTH=", "CODECS=\"avc1.", "mp4a.40.2\"", "FRAME-RATE=30.000"] {
                XCTAssertTrue(v.info.contains(attribute), "\(attribute) missing in \(v.info)")
            }
        }

        var keyframesByRendition: [[Double]] = []
        for v in variants {
            let playlist = dir + "/ladder/" + v.uri
            let folder = (playlist as NSString).deletingLastPathComponent
            let media = try W.mediaPlaylist(playlist)
            XCTAssertTrue(media.ended, "window: all ends with #EXT-X-ENDLIST")
            XCTAssertTrue(media.text.contains("#EXT-X-PROGRAM-DATE-TIME:"), "program date time on segments")
            let decoded = try W.decode(playlist)
            XCTAssertEqual(decoded.errors, "", "\(v.uri) decodes without an error")
            let span = try W.videoSpan(playlist)
            XCTAssertEqual(span, 10, accuracy: 0.5, "\(v.uri) lasts 10 s")
            XCTAssertEqual(Double(decoded.frames), 300, accuracy: 8, "\(v.uri): 30 fps for 10 s")
            for s in media.segments {
                XCTAssertLessThanOrEqual(s.duration, 2.1, "\(v.uri) \(s.uri)")
                let file = try W.playable(folder + "/" + s.uri, initSection: media.initURI.map { folder + "/" + $0 }, in: dir)
                XCTAssertTrue(try W.startsOnKeyframe(file), "\(v.uri) \(s.uri) starts on a keyframe")
            }
            keyframesByRendition.append(try W.keyframeTimes(playlist))
        }
        let reference = keyframesByRendition[0]
        XCTAssertEqual(reference.count, 5, "a keyframe every 2 s: \(reference)")
        for (i, k) in keyframesByRendition.enumerated().dropFirst() {
            XCTAssertEqual(k.count, reference.count, "\(variants[i].uri) keyframes \(k) vs \(reference)")
            for (a, b) in zip(k, reference) { XCTAssertEqual(a, b, accuracy: 0.001, "\(variants[i].uri) keyframe times") }
        }
        print("hls ladder: \(variants.map(\.resolution)) keyframes at \(reference)")
    }

    func testSlidingWindowDeletesOldSegments() throws {
        let dir = CLI.scratch()
        let master = dir + "/live/master.m3u8"
        CLI.write(W.smallLadder(master: master, window: "3"), to: dir + "/p.pipe")
        let r = try CLI.run(["run", dir + "/p.pipe", "--duration", "12s"])
        XCTAssertEqual(r.status, 0, r.stderr)
        for rendition in ["360p", "180p"] {
            let folder = dir + "/live/" + rendition
            let media = try W.mediaPlaylist(folder + "/index.m3u8")
            XCTAssertEqual(media.segments.count, 3, media.text)
            XCTAssertGreaterThanOrEqual(media.mediaSequence, 8, "12 one-second segments, the last 3 named")
            let onDisk = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix("seg_") }
            // hlsenc keeps one segment past the window (hls_delete_threshold 1) for players still reading it.
            XCTAssertLessThanOrEqual(onDisk.count, 4, "old segments deleted: \(onDisk.sorted())")
            XCTAssertFalse(onDisk.contains("seg_00000.m4s"), "the first segment was deleted")
            XCTAssertEqual(try W.decode(folder + "/index.m3u8").errors, "")
            for s in media.segments { XCTAssertTrue(onDisk.contains(s.uri), "\(s.uri) is named and present") }
        }
    }

    func testEventPlaylistEndsWithEndlistAfterSigint() throws {
        let dir = CLI.scratch()
        let master = dir + "/event/master.m3u8"
        CLI.write(W.smallLadder(master: master, window: "all"), to: dir + "/p.pipe")
        let r = try CLI.run(["run", dir + "/p.pipe", "--realtime"], interruptAfter: 6.5, timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        for rendition in ["360p", "180p"] {
            let playlist = dir + "/event/\(rendition)/index.m3u8"
            let media = try W.mediaPlaylist(playlist)
            XCTAssertTrue(media.ended, "#EXT-X-ENDLIST after a clean stop:\n\(media.text)")
            XCTAssertTrue(media.text.contains("#EXT-X-PLAYLIST-TYPE:EVENT"), media.text)
            XCTAssertEqual(media.mediaSequence, 0, "every segment kept")
            XCTAssertEqual(media.segments.first?.uri, "seg_00000.m4s")
            let decoded = try W.decode(playlist)
            XCTAssertEqual(decoded.errors, "")
            XCTAssertEqual(try W.videoSpan(playlist), media.segments.map(\.duration).reduce(0, +), accuracy: 0.1)
            XCTAssertGreaterThan(media.segments.count, 4, "about 6 s recorded")
        }
        XCTAssertEqual(try W.variants(master).map(\.resolution), ["640x360", "320x180"])
    }

    func testKillNineLeavesPlaylistsNamingOnlyWholeSegments() throws {
        for moment in [3.5, 5.2] {
            let dir = CLI.scratch()
            let master = dir + "/crash/master.m3u8"
            CLI.write(W.smallLadder(master: master, window: "all"), to: dir + "/p.pipe")
            let run = try BackgroundRun(["run", dir + "/p.pipe", "--realtime", "--events", "json"])
            XCTAssertNotNil(run.waitFor(timeout: 30) { ($0["event"] as? String) == "stats" && ($0["media_time"] as? Double ?? 0) >= moment })
            kill(run.process.processIdentifier, SIGKILL)
            _ = run.waitForExit()
            XCTAssertEqual(try W.variants(master).count, 2, "the master names both renditions")
            for rendition in ["360p", "180p"] {
                let folder = dir + "/crash/" + rendition
                let media = try W.mediaPlaylist(folder + "/index.m3u8")
                XCTAssertFalse(media.ended, "killed: no end mark")
                XCTAssertGreaterThanOrEqual(media.segments.count, 2, "kill at \(moment) s:\n\(media.text)")
                for s in media.segments {
                    let file = try W.playable(folder + "/" + s.uri, initSection: media.initURI.map { folder + "/" + $0 }, in: dir)
                    let decoded = try W.decode(file)
                    XCTAssertEqual(decoded.errors, "", "kill at \(moment) s: \(rendition)/\(s.uri) decodes")
                    XCTAssertEqual(Double(decoded.frames), s.duration * 30, accuracy: 1.5, "\(rendition)/\(s.uri) is whole")
                }
                XCTAssertEqual(try W.decode(try W.ended(folder + "/index.m3u8")).errors, "", "the playlist plays")
            }
        }
    }

    func testPrivacyScheduleHidesTheSamePicturesInEveryRendition() throws {
        let dir = CLI.scratch()
        let master = dir + "/private/master.m3u8"
        CLI.write(W.smallLadder(master: master, window: "all", privacy: ", schedule: [{at: 2s, for: 2s}]"), to: dir + "/p.pipe")
        let r = try CLI.run(["run", dir + "/p.pipe", "--duration", "6s"])
        XCTAssertEqual(r.status, 0, r.stderr)
        var hiddenByRendition: [[Int]] = []
        for rendition in ["360p", "180p"] {
            let frames = try W.grayPictures(dir + "/private/\(rendition)/index.m3u8", width: 64, height: 36)
            XCTAssertEqual(Double(frames.count), 180, accuracy: 2)
            // The card is still while testsrc moves: the pictures equal to the card's middle one are the hidden ones.
            let card = frames[90]
            let hidden = frames.indices.filter { i in zip(frames[i], card).map { abs(Int($0) - Int($1)) }.max()! <= 6 }
            hiddenByRendition.append(hidden)
        }
        XCTAssertEqual(hiddenByRendition[0], Array(60..<120), "360p: the card exactly from 2 s to 4 s")
        XCTAssertEqual(hiddenByRendition[0], hiddenByRendition[1], "the same pictures hidden in every rendition")
    }

    func testPauseCutsTheSameSpanFromEveryRendition() throws {
        let dir = CLI.scratch()
        let master = dir + "/paused/master.m3u8"
        let control = dir + "/ctl/p.sock"
        CLI.write(W.smallLadder(master: master, window: "all", extra: "control: \(control)"), to: dir + "/p.pipe")
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--realtime", "--duration", "8s", "--events", "json"])
        XCTAssertNotNil(run.waitFor(timeout: 30) { ($0["event"] as? String) == "stats" && ($0["media_time"] as? Double ?? 0) >= 2.5 })
        let pausing = Date()
        XCTAssertEqual(try CLI.run(["ctl", control, "pause"]).status, 0)
        let pausedAt = Date()
        usleep(2_000_000)
        let resuming = Date()
        XCTAssertEqual(try CLI.run(["ctl", control, "resume"]).status, 0)
        let resumedAt = Date()
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        let resumed = try XCTUnwrap(run.events.first { $0["event"] as? String == "resumed" })
        let paused = try XCTUnwrap(resumed["paused_for"] as? Double)
        // The run was paused at most from the moment `ctl pause` started to when `ctl resume`
        // returned, and at least from when pause returned to when resume started (on a loaded
        // machine each ctl process takes a while to start).
        XCTAssertGreaterThanOrEqual(paused, resuming.timeIntervalSince(pausedAt) - 0.05)
        XCTAssertLessThanOrEqual(paused, resumedAt.timeIntervalSince(pausing) + 0.05)
        var timesByRendition: [[Double]] = []
        for rendition in ["360p", "180p"] {
            let playlist = dir + "/paused/\(rendition)/index.m3u8"
            XCTAssertEqual(try W.decode(playlist).errors, "")
            let times = try CLI.videoFrameTimes(playlist)
            XCTAssertEqual(try W.videoSpan(playlist), 8 - paused, accuracy: 0.3, "\(rendition): 8 s run, the paused \(paused) s cut out")
            XCTAssertLessThan(zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 1, 0.1, "\(rendition): no hole where the pause was")
            timesByRendition.append(times)
        }
        XCTAssertEqual(timesByRendition[0].count, timesByRendition[1].count, "the same pictures in both renditions")
        for (a, b) in zip(timesByRendition[0], timesByRendition[1]) { XCTAssertEqual(a, b, accuracy: 0.001) }
    }

    func testCheckRefusesKeyframesThatDoNotDivideTheSegment() throws {
        let dir = CLI.scratch()
        var pipe = W.smallLadder(master: dir + "/x/master.m3u8", window: "6")
        pipe = pipe.replacingOccurrences(of: "bitrate: 600k, gop: 30,", with: "bitrate: 600k, gop: 45,")
            .replacingOccurrences(of: "segment: 1s", with: "segment: 2s")
        CLI.write(pipe, to: dir + "/gop.pipe")
        let gop = try CLI.run(["check", dir + "/gop.pipe"])
        XCTAssertEqual(gop.status, 1)
        XCTAssertTrue((gop.stdout + gop.stderr).contains("not a multiple of the keyframe interval of 'v360' (1.5s)"), gop.stdout)
        XCTAssertTrue((gop.stdout + gop.stderr).contains("gop.pipe:14:"), "reported at the hls node's line: \(gop.stdout)")

        CLI.write(W.smallLadder(master: dir + "/x/master.m3u8", window: "6").replacingOccurrences(of: "gop: 30, keyframes: fixed,", with: "gop: 30,"),
                  to: dir + "/auto.pipe")
        let auto = try CLI.run(["check", dir + "/auto.pipe"])
        XCTAssertEqual(auto.status, 1)
        XCTAssertTrue((auto.stdout + auto.stderr).contains("set keyframes: fixed on 'v360'"), auto.stdout)

        CLI.write(W.smallLadder(master: dir + "/x/master.m3u8", window: "sometimes"), to: dir + "/window.pipe")
        let window = try CLI.run(["check", dir + "/window.pipe"])
        XCTAssertEqual(window.status, 1)
        XCTAssertTrue((window.stdout + window.stderr).contains("or 'all'; got 'sometimes'"), window.stdout)
    }
}
