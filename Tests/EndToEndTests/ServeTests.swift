import AVGraphTesting
import Foundation
import XCTest

/// `avgraph serve`: many publishers through one door, each its own run of a template, the
/// backend asked before each publish (`--auth`), and the whole judged on what was recorded
/// (ffprobe). Publishers are ffmpeg over RTMP and SRT; the backend is ServeBackend (Python).
final class ServeTests: XCTestCase {
    static let seconds = 8.0

    /// 8 s of 320x240 30 fps H.264 (a keyframe a second) and 48 kHz AAC, made once.
    static let clip: String = {
        let path = CLI.scratch("serve-media") + "/clip.mp4"
        _ = try? CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-f", "lavfi",
                            "-i", "sine=f=440:sample_rate=48000", "-t", String(seconds), "-c:v", "libx264", "-preset", "ultrafast",
                            "-g", "30", "-pix_fmt", "yuv420p", "-c:a", "aac", path])
        return path
    }()

    /// A template recording each session to `rec/{key}-{session}.mp4`; its runs wait `idle` for their publisher.
    static func template(_ dir: String, idle: String) -> String {
        let path = dir + "/serve.pipe"
        CLI.write("""
            pipeline: served
            nodes:
              src: {type: publisher, idle: \(idle), size: 320x240}
              fit: {type: resize, in: src.video, size: 320x240, mode: fit, queue: {size: 30, policy: block}}
              v: {type: h264, in: fit, preset: ultrafast, queue: {size: 30, policy: block}}
              a: {type: aac, in: src.audio}
              out: {type: file, in: [v, a], path: "rec/{key}-{session}.mp4"}
            """, to: path)
        try? FileManager.default.createDirectory(atPath: dir + "/rec", withIntermediateDirectories: true)
        return path
    }

    /// ffmpeg publishing the clip (its first `seconds`) at its pace to `url`.
    static func publish(_ url: String, seconds: Double = seconds) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-re", "-t", String(seconds), "-i", clip, "-c", "copy", "-f", url.hasPrefix("srt") ? "mpegts" : "flv", url]
        p.standardInput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// `avgraph serve ARGS`, once it listens; `test` kills what it leaves.
    static func startServe(_ args: [String], dir: String, environment: [String: String], in test: XCTestCase) throws -> BackgroundRun {
        let serve = try BackgroundRun(["serve"] + args, cwd: dir, environment: environment)
        test.addTeardownBlock {
            // Whatever a failed test left: serve's runs first (they are its children), then serve.
            for (pid, _) in Self.runs(of: serve.process.processIdentifier) { kill(pid, SIGKILL) }
            if serve.process.isRunning { kill(serve.process.processIdentifier, SIGKILL) }
        }
        let end = Date().addingTimeInterval(15)
        while Date() < end && serve.stderr.components(separatedBy: "listening on").count <= args.filter({ $0 == "--listen" }).count {
            usleep(50_000)
        }
        return serve
    }

    /// The runs `serve` started: pid and command line.
    static func runs(of serve: Int32) -> [(Int32, String)] {
        let out = (try? CLI.shell(["ps", "-o", "pid=,args=", "--ppid", String(serve)])) ?? ""
        return out.split(separator: "\n").compactMap { line in
            let t = line.trimmingCharacters(in: .whitespaces)
            guard let sp = t.firstIndex(of: " "), let pid = Int32(t[..<sp]) else { return nil }
            return (pid, String(t[sp...]))
        }
    }

    /// Sessions serve named in its log whose run is still a process.
    static func leftovers(_ log: String) -> [String] {
        let ids = log.components(separatedBy: "session ").dropFirst().compactMap { $0.split(separator: " ").first.map(String.init) }
        return Set(ids).sorted().filter { id in ((try? CLI.shell(["pgrep", "-f", "--", "--name \(id) "])) ?? "").contains { $0.isNumber } }
    }

    /// Waits up to `timeout` seconds for `condition`; whether it came.
    @discardableResult
    static func waitFor(timeout: Double, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() > end { return false }
            usleep(50_000)
        }
        return true
    }

    /// Sessions serve has started, by its log.
    static func started(_ log: String) -> Int { log.components(separatedBy: "(run pid ").count - 1 }

    /// Publishers gone whose runs have all they sent, by serve's log.
    static func left(_ log: String) -> Int { log.components(separatedBy: "left; the run has all it sent").count - 1 }

    static func recordings(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir + "/rec")) ?? []).filter { $0.hasSuffix(".mp4") }.sorted()
    }

    /// Seconds and frames of video, the picture's width, and seconds of audio in `path`.
    static func measure(_ path: String) throws -> (video: Double, frames: Int, width: Int, audio: Double) {
        let times = try CLI.videoFrameTimes(path)
        let probe = try CLI.probe(path)
        let width = CLI.stream(probe, "video")?["width"] as? Int ?? 0
        let audio = Double(try CLI.samples(path, rate: 48000).count) / 48000
        return ((times.last ?? 0) - (times.first ?? 0) + 1.0 / 30, times.count, width, audio)
    }

    /// Done when, point 1: six publishers at once (four RTMP, two SRT) behind `--auth`; the one
    /// the backend refuses and the one it does not answer in 2 s record nothing; `kill -9` of one
    /// run leaves the others whole and the listener admitting a new publisher; `set` from the
    /// backend reaches its run; SIGTERM finalizes every file and serve exits 0.
    func testSixPublishersBehindAuthOneKilledThenSigtermFinalizesAll() throws {
        let dir = CLI.scratch("serve-auth")
        _ = Self.clip
        let backend = try ServeBackend(sets: ["phone1": ["fit.size": "160x120"]])
        defer { backend.stop() }
        let (runtime, environment) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let rtmp = try LoopbackPort.free(), srt = try LoopbackPort.free()
        let template = Self.template(dir, idle: "30s")
        let serve = try Self.startServe([template, "--listen", "rtmp://127.0.0.1:\(rtmp)", "--listen", "srt://127.0.0.1:\(srt)",
                                         "--auth", backend.url("/auth")], dir: dir, environment: environment, in: self)
        let rtmpURL = { (key: String) in "rtmp://127.0.0.1:\(rtmp)/live/\(key)" }
        let began = Date()
        var publishers = try ["phone1", "phone2", "phone3", "denied-key"].map { try Self.publish(rtmpURL($0)) }
        publishers += try ["phone5", "phone6"].map { try Self.publish("srt://127.0.0.1:\(srt)?streamid=\($0)") }
        publishers.append(try Self.publish(rtmpURL("slow-key"), seconds: 4))
        defer { for p in publishers where p.isRunning { p.terminate() } }

        // Every publisher answered: five sessions started, two refused (the slow one after --auth's 2 s).
        Self.waitFor(timeout: 15) { Self.started(serve.stderr) == 5 && serve.stderr.components(separatedBy: "refused by --auth").count == 3 }
        let runs = Self.runs(of: serve.process.processIdentifier)
        XCTAssertEqual(runs.count, 5, "one run per admitted publish: \(runs.map(\.1))\n\(serve.stderr)")
        let victim = try XCTUnwrap(runs.first { $0.1.contains("key=phone3") }, "no run for phone3: \(runs.map(\.1))")
        // The scenario, not a wait for something to happen: the kill and the late publisher come at 4 s, once
        // every run records steadily (killed at 2 s, the late run starting in the others' first seconds, the
        // others recorded 7.6 to 7.8 s of their 8 on the loaded 2-core machine).
        Thread.sleep(until: began.addingTimeInterval(4))
        kill(victim.0, SIGKILL)
        XCTAssertTrue(Self.waitFor(timeout: 10) { serve.stderr.contains("killed by signal 9") }, serve.stderr)
        let late = try Self.publish(rtmpURL("phone7"), seconds: 3)
        publishers.append(late)
        XCTAssertTrue(Self.waitFor(timeout: 10) { Self.started(serve.stderr) == 6 }, "the listener admits a new publisher: \(serve.stderr)")
        for p in publishers { p.waitUntilExit() }
        // Each run says when its publisher's last media is in (SIGTERM before that would cut its tail).
        XCTAssertTrue(Self.waitFor(timeout: 10) { Self.left(serve.stderr) == 5 }, serve.stderr)
        XCTAssertEqual(Self.runs(of: serve.process.processIdentifier).count, 5, "the four left and the late one still wait for their publishers")

        kill(serve.process.processIdentifier, SIGTERM)
        XCTAssertEqual(serve.waitForExit(timeout: 30), 0, serve.stderr)
        XCTAssertEqual(Self.leftovers(serve.stderr), [], "every run ended with serve")

        let files = Self.recordings(dir)
        print("serve: recordings \(files)")
        for key in ["phone1", "phone2", "phone5", "phone6", "phone7"] {
            let name = try XCTUnwrap(files.first { $0.hasPrefix(key + "-") }, "no recording for \(key): \(files)\n\(serve.stderr)")
            let m = try Self.measure(dir + "/rec/" + name)
            let expected = key == "phone7" ? 3.0 : Self.seconds
            print("serve: \(key): video \(String(format: "%.3f", m.video)) s (\(m.frames) frames, \(m.width) wide), audio \(String(format: "%.3f", m.audio)) s")
            XCTAssertEqual(m.video, expected, accuracy: 0.3, "\(key): seconds of video")
            XCTAssertEqual(Double(m.frames), expected * 30, accuracy: 9, "\(key): pictures")
            XCTAssertEqual(m.audio, expected, accuracy: 0.4, "\(key): seconds of audio")
            XCTAssertEqual(m.width, key == "phone1" ? 160 : 320, "\(key): the backend's set reaches only its run")
        }
        XCTAssertFalse(files.contains { $0.hasPrefix("denied-key") || $0.hasPrefix("slow-key") }, "refused publishers record nothing: \(files)")
        XCTAssertTrue(serve.stderr.contains("refused by --auth (status 403)"), serve.stderr)
        XCTAssertTrue(serve.stderr.contains("refused by --auth (no answer within 2"), serve.stderr)
        XCTAssertFalse(serve.stderr.contains("denied-key") || serve.stderr.contains("slow-key"), "a warning never names the key")
        XCTAssertTrue(serve.stderr.contains("killed by signal 9"), serve.stderr)
        let questions = backend.authQuestions
        XCTAssertEqual(Set(questions.compactMap { $0["key"] as? String }),
                       ["phone1", "phone2", "phone3", "denied-key", "phone5", "phone6", "slow-key", "phone7"])
        XCTAssertEqual(questions.first { $0["key"] as? String == "phone5" }?["protocol"] as? String, "srt")
        XCTAssertEqual(questions.first { $0["key"] as? String == "phone1" }?["app"] as? String, "live")
    }

    /// `--keys-file` and `--http`: an HEVC phone over Enhanced RTMP (ErtmpPublisher, written from the
    /// specification) is recorded; a publisher that leaves and comes back with the same key
    /// within the run's `idle` continues its run (one file, both halves); a key not in the file is
    /// refused in the protocol and records nothing; the index lists both live sessions, each
    /// preview a picture of its run.
    func testKeysFileHevcPhoneAndAReturningPublisherContinuesItsRun() throws {
        let dir = CLI.scratch("serve-keys")
        _ = Self.clip
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-i", Self.clip, "-c:v", "libx265", "-preset", "ultrafast",
                           "-x265-params", "bframes=0:keyint=30:log-level=error", "-an", "-f", "hevc", dir + "/v.hevc",
                           "-vn", "-c:a", "copy", "-f", "adts", dir + "/a.aac"])
        CLI.write("# who may publish\nphone-hevc\nback\n", to: dir + "/keys")
        let (runtime, environment) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let rtmp = try LoopbackPort.free(), http = try LoopbackPort.free()
        let serve = try Self.startServe([Self.template(dir, idle: "3s"), "--listen", "rtmp://127.0.0.1:\(rtmp)", "--keys-file", dir + "/keys",
                                         "--http", "127.0.0.1:\(http)"], dir: dir, environment: environment, in: self)
        CLI.write(ErtmpPublisher.script, to: dir + "/publisher.py")
        let hevc = Process()
        hevc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        hevc.arguments = ["python3", dir + "/publisher.py", "rtmp://127.0.0.1:\(rtmp)/live/phone-hevc", "--video", dir + "/v.hevc",
                          "--codec", "hvc1", "--audio", dir + "/a.aac"]
        hevc.standardOutput = FileHandle.nullDevice
        try hevc.run()
        defer { if hevc.isRunning { hevc.terminate() } }
        let intruder = try Self.publish("rtmp://127.0.0.1:\(rtmp)/live/intruder", seconds: 2)
        let first = try Self.publish("rtmp://127.0.0.1:\(rtmp)/live/back", seconds: 3)
        // --http: the live sessions, each with its preview (served from here, fetched from its run's own page),
        // once each run's `page` event has said where its page is.
        let sessions = { () -> [[String: Any]] in
            let text = (try? CLI.shell(["curl", "-sf", "http://127.0.0.1:\(http)/sessions"])) ?? "[]"
            return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [[String: Any]] ?? []
        }
        Self.waitFor(timeout: 15) { sessions().filter { $0["page"] is String }.count == 2 }
        let listed = sessions()
        XCTAssertEqual(Set(listed.compactMap { $0["key"] as? String }), ["phone-hevc", "back"], "\(listed)")
        for entry in listed {
            let id = entry["session"] as? String ?? "", picture = dir + "/preview-\(id).jpg"
            // The index answers 503 until the run has a picture.
            Self.waitFor(timeout: 10) { (try? CLI.shell(["curl", "-sf", "-o", picture, "http://127.0.0.1:\(http)/preview/\(id).jpg"])) != nil }
            XCTAssertEqual(CLI.stream(try CLI.probe(picture), "video")?["width"] as? Int, 320, "\(id)'s preview is a picture of its run")
            XCTAssertTrue(try CLI.shell(["curl", "-sf", "http://127.0.0.1:\(http)/"]).contains("/preview/\(id).jpg"), "the index shows \(id)")
        }
        first.waitUntilExit()
        // Back only once its session says the first publisher has left (still within the run's idle).
        XCTAssertTrue(Self.waitFor(timeout: 3) { sessions().contains { $0["key"] as? String == "back" && $0["publishing"] as? Bool == false } },
                      "\(sessions())")
        let second = try Self.publish("rtmp://127.0.0.1:\(rtmp)/live/back", seconds: 3)
        for p in [second, intruder, hevc] { p.waitUntilExit() }
        XCTAssertEqual(hevc.terminationStatus, 0, "the Enhanced RTMP publisher's exit status")
        XCTAssertNotEqual(intruder.terminationStatus, 0, "an unknown key is refused")
        // The HEVC phone's run and both halves of back's: each says when all its publisher sent is in.
        XCTAssertTrue(Self.waitFor(timeout: 10) { Self.left(serve.stderr) == 3 }, serve.stderr)
        kill(serve.process.processIdentifier, SIGTERM)
        XCTAssertEqual(serve.waitForExit(timeout: 30), 0, serve.stderr)

        let files = Self.recordings(dir)
        print("serve: keys-file recordings \(files)")
        XCTAssertEqual(files.filter { $0.hasPrefix("back-") }.count, 1, "the returning publisher continued its run: \(files)")
        XCTAssertFalse(files.contains { $0.hasPrefix("intruder") }, "\(files)")
        XCTAssertTrue(serve.stderr.contains("refused: unknown key"), serve.stderr)
        XCTAssertTrue(serve.stderr.contains("back in session"), serve.stderr)
        let hevcFile = try XCTUnwrap(files.first { $0.hasPrefix("phone-hevc-") }, "\(files)\n\(serve.stderr)")
        let h = try Self.measure(dir + "/rec/" + hevcFile)
        print("serve: HEVC phone: video \(String(format: "%.3f", h.video)) s (\(h.frames) frames), audio \(String(format: "%.3f", h.audio)) s")
        XCTAssertEqual(h.video, Self.seconds, accuracy: 0.3, "seconds of the HEVC phone")
        XCTAssertEqual(h.audio, Self.seconds, accuracy: 0.4)
        if let back = files.first(where: { $0.hasPrefix("back-") }) {
            let m = try Self.measure(dir + "/rec/" + back)
            print("serve: back twice: video \(String(format: "%.3f", m.video)) s (\(m.frames) frames)")
            XCTAssertEqual(Double(m.frames), 180, accuracy: 6, "both 3 s halves in the one file")
        }
    }

    /// A phone app's `onPrivacy` switches (scripts/rtmp-publish) reach its run through serve's
    /// relay: the recording shows the named card on exactly the pictures from each switch on.
    func testOnPrivacyThroughServeCoversExactlyItsPictures() throws {
        let dir = CLI.scratch("serve-privacy")
        let flv = dir + "/phone.flv"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=720x1280:r=30:d=6",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=6", "-c:v", "libx264", "-preset", "ultrafast", "-g", "30",
                           "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", flv])
        let assets = CLI.packageRoot + "/assets"
        CLI.write("""
            pipeline: served-privacy
            nodes:
              src:     {type: publisher, idle: 1s}
              upright: {type: orient, in: src.video}
              fit:     {type: resize, in: upright, size: 640x360, mode: fit}
              privacy: {type: privacy, in: fit, image: \(assets)/privacy.png, cards: {typing: \(assets)/typing.png}}
              video:   {type: h264, in: privacy, preset: ultrafast, queue: {size: 60}}
              out:     {type: file, in: [video], path: "out-{key}.mp4"}
            """, to: dir + "/p.pipe")
        let (runtime, environment) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let port = try LoopbackPort.free()
        let serve = try Self.startServe([dir + "/p.pipe", "--listen", "rtmp://127.0.0.1:\(port)", "--open"], dir: dir, environment: environment, in: self)
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone",
                                    "--privacy", "2s:2s:typing", "--privacy", "4500ms:1s"])
        XCTAssertEqual(publish.status, 0, publish.stderr)
        let end = Date().addingTimeInterval(20)
        while Date() < end && !Self.runs(of: serve.process.processIdentifier).isEmpty { usleep(100_000) }
        kill(serve.process.processIdentifier, SIGTERM)
        XCTAssertEqual(serve.waitForExit(timeout: 20), 0, serve.stderr)
        try RtmpPrivacyTests.assertSwitchesCoverTheirPictures(dir + "/out-phone.mp4")
    }

    /// Without --keys-file, --auth or --open, serve refuses to start (usage error, exit 2).
    func testServeWithoutAChoiceOfWhoMayPublishRefusesToStart() throws {
        let dir = CLI.scratch("serve-choice")
        let result = try CLI.run(["serve", Self.template(dir, idle: "5s"), "--listen", "rtmp://127.0.0.1:\(try LoopbackPort.free())"], timeout: 20)
        XCTAssertEqual(result.status, 2)
        XCTAssertTrue(result.stderr.contains("choose --keys-file FILE, --auth URL or --open"), result.stderr)
    }
}
