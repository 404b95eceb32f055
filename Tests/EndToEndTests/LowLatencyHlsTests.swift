import AVGraphTesting
import Foundation
import XCTest

/// Low-Latency HLS (issue 52) served by the run's own `--http` server, read by clients nobody
/// here wrote (ffmpeg 5.1, GStreamer's hlsdemux2, Chromium) and by two written in the test's
/// scripts from RFC 8216bis (`scripts/llhls-client`: blocking reload, preload hints, parts;
/// `scripts/hls-check`: the playlist rules). The run plays the marked clip (each picture carries
/// its frame number, WhepTests.markedClip) so a player's latency is when it decoded picture n
/// less when the run's clock reached it (start + n/30 s).
final class LowLatencyHlsTests: XCTestCase {
    /// The run: the clip encoded twice (640x360 and 320x180, keyframes every second) into 1 s
    /// segments of 200 ms parts, served at /hls/out/.
    static func startRun(_ dir: String, port: Int, seconds: Int, window: String = "6", renditions: [(size: String, bitrate: String)]? = nil,
                         noisy: Bool = false, extra: [String] = [], prefix: [String] = []) throws -> BackgroundRun {
        try WhepTests.markedClip(dir + "/marks.mp4", seconds: seconds, noise: noisy)
        let ladder = renditions ?? [("640x360", "1500k"), ("320x180", "400k")]
        var nodes = "  src:   {type: file, path: marks.mp4}\n"
        var ins: [String] = []
        for (i, r) in ladder.enumerated() {
            nodes += "  s\(i): {type: resize, in: src.video, size: \(r.size)}\n"
            nodes += "  v\(i): {type: h264, in: s\(i), bitrate: \(r.bitrate), bframes: 0, preset: ultrafast, tune: zerolatency, gop: 30, keyframes: fixed}\n"
            ins.append("v\(i)")
        }
        nodes += "  audio: {type: aac, in: src.audio, bitrate: 128k}\n"
        nodes += "  out:   {type: hls, in: [\(ins.joined(separator: ", ")), audio], path: out/master.m3u8, segment: 1s, window: \(window), low-latency: 200ms}\n"
        CLI.write("pipeline: ll\nnodes:\n" + nodes, to: dir + "/ll.pipe")
        try FileManager.default.createDirectory(atPath: dir + "/out", withIntermediateDirectories: true)
        let run = try BackgroundRun(["run", dir + "/ll.pipe", "--events", "json", "--http", "127.0.0.1:\(port)"] + extra, cwd: dir, prefix: prefix)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "start" }, run.stderr)
        return run
    }

    /// A script's JSON on stdout.
    static func json(_ args: [String]) throws -> [String: Any] {
        let out = try CLI.shell(args)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any], out)
    }

    /// A script run in the background; its JSON read when it exits.
    final class Watcher: @unchecked Sendable {
        let process = Process()
        let output = Pipe()
        let command: String
        /// What it says on stderr, kept for a failure's message.
        let errorPath: String
        private var data = Data()
        private let lock = NSLock()
        init(_ args: [String]) throws {
            command = args.prefix(4).joined(separator: " ")
            process.executableURL = URL(fileURLWithPath: args[0])
            process.arguments = Array(args.dropFirst())
            process.standardOutput = output
            process.standardInput = FileHandle.nullDevice
            errorPath = NSTemporaryDirectory() + "watcher-\(UUID().uuidString).err"
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: errorPath)
            output.fileHandleForReading.readabilityHandler = { [weak self] h in
                let d = h.availableData
                self?.lock.lock(); self?.data.append(d); self?.lock.unlock()
            }
            try process.run()
        }
        func result() throws -> [String: Any] {
            process.waitUntilExit()
            output.fileHandleForReading.readabilityHandler = nil
            lock.lock(); defer { lock.unlock() }
            data.append(output.fileHandleForReading.readDataToEndOfFile())
            guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw NSError(domain: "Watcher", code: Int(process.terminationStatus),
                              userInfo: [NSLocalizedDescriptionKey: "\(command) exited \(process.terminationStatus) saying: \(String(decoding: data, as: UTF8.self)); stderr ends: "
                                         + String(((try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "").suffix(1500))])
            }
            return object
        }
    }

    /// Glass-to-glass milliseconds of each picture [frame, ms] against the run's clock.
    static func latencies(_ pictures: [[Double]], start: Double) -> [Double] { pictures.map { $0[1] - (start + $0[0] * 1000 / 30) } }

    static func figure(_ name: String, _ latencies: [Double]) -> String {
        guard !latencies.isEmpty else { return "\(name): no picture" }
        return String(format: "%@: %d pictures, p50 %.0f ms, p95 %.0f ms", name, latencies.count,
                      WhepTests.quantile(latencies, 0.5), WhepTests.quantile(latencies, 0.95))
    }

    /// 60 s of the presentation read at once by the specification's client, the playlist
    /// checker, ffmpeg (classic HLS: it ignores parts), GStreamer's hlsdemux2 and Chromium 156's
    /// own HLS player (neither asks for a part: they play the same URL as classic HLS).
    func testSpecificationClientFfmpegGstreamerAndChromiumPlayItLiveAndThePlaylistsKeepTheRules() throws {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        let run = try Self.startRun(dir, port: port, seconds: 80)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        let start = try XCTUnwrap(run.arrival { $0["event"] as? String == "start" }) * 1000
        let master = "http://127.0.0.1:\(port)/hls/out/master.m3u8"
        let scripts = CLI.packageRoot + "/scripts/"
        // Viewers join a broadcast that is on: hlsdemux2 showed nothing when it came in before the playlist had three segments.
        Thread.sleep(forTimeInterval: 4)
        let client = try Watcher([scripts + "llhls-client", "--url", master, "--seconds", "60"])
        let check = try Watcher([scripts + "hls-check", "--url", master, "--seconds", "60"])
        let ffmpeg = try Watcher([scripts + "hls-watch", "--player", "ffmpeg", "--url", master, "--seconds", "60"])
        let gst = try Watcher([scripts + "hls-watch", "--player", "gst", "--url", master, "--seconds", "60"])
        let chromium = try Watcher([scripts + "hls-watch", "--player", "chromium", "--url", master, "--seconds", "60",
                                    "--screenshot", CLI.packageRoot + "/docs/llhls-chromium.png"])
        let (c, k, f, g, b) = (try client.result(), try check.result(), try ffmpeg.result(), try gst.result(), try chromium.result())

        let ll = Self.latencies(c["pictures"] as? [[Double]] ?? [], start: start)
        let classic = Self.latencies(f["pictures"] as? [[Double]] ?? [], start: start)
        let hlsdemux2 = Self.latencies(g["pictures"] as? [[Double]] ?? [], start: start)
        let browser = Self.latencies(b["pictures"] as? [[Double]] ?? [], start: start)
        print("llhls " + [Self.figure("specification client", ll), Self.figure("ffmpeg 5.1 (classic)", classic),
                          Self.figure("hlsdemux2 (follows parts: \(g["follows_parts"] ?? "?"))", hlsdemux2),
                          Self.figure("chromium (follows parts: \(b["follows_parts"] ?? "?"))", browser)].joined(separator: "; "))
        print("llhls check: \(k["violations_total"] ?? "?") violations; client requests \(c["requests"] ?? [:]), stalls \(c["stalls"] ?? [])")
        XCTAssertEqual(k["violations_total"] as? Int, 0, "the playlists keep RFC 8216bis's rules: \(k)")
        XCTAssertGreaterThanOrEqual(ll.count, 60 * 30 * 9 / 10, "the specification client decodes the pictures of 60 s")
        XCTAssertLessThanOrEqual(WhepTests.quantile(ll, 0.5), 2000, "the specification client within 2 s")
        XCTAssertLessThanOrEqual(WhepTests.quantile(ll, 0.95), 2000)
        XCTAssertEqual((c["stalls"] as? [Any])?.count, 0, "no stall")
        XCTAssertGreaterThanOrEqual(classic.count, 40 * 30, "ffmpeg plays the same URL as classic HLS")
        XCTAssertGreaterThanOrEqual(hlsdemux2.count, 40 * 30, "hlsdemux2 plays it")
        XCTAssertGreaterThanOrEqual(browser.count, 40 * 30, "Chromium plays it with its own HLS player")
        XCTAssertTrue((b["stalls"] as? [Any])?.isEmpty ?? false, "Chromium does not stall: \(b["stalls"] ?? [])")
        for l in [ll, classic, hlsdemux2, browser] { XCTAssertGreaterThan(l.min() ?? -1, 0, "no picture decoded before the run's clock reached it") }
        run.process.interrupt()
        XCTAssertEqual(run.waitForExit(timeout: 20), 0, run.stderr)
    }

    /// The specification's client, adaptive, watches while the link narrows to 0.9 Mbit/s, where
    /// the 640x360 rendition (1.5 Mbit/s of noise) no longer fits: it switches down without a
    /// stall over 1 s. Server and client share a network namespace whose loopback shapes what
    /// the server sends.
    func testAnAdaptiveClientSwitchesDownOnANarrowLinkWithoutAStall() throws {
        try XCTSkipUnless(ShapedLink.isAvailable, "needs root, ip and tc")
        let dir = CLI.scratch(), port = 8080
        let link = try ShapedLink(megabits: 50, port: port, direction: .fromPort)
        addTeardownBlock { link.remove() }
        let run = try Self.startRun(dir, port: port, seconds: 60, renditions: [("640x360", "1500k"), ("320x180", "300k")], noisy: true,
                                    prefix: [ShapedLink.ip!, "netns", "exec", link.name])
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        Thread.sleep(forTimeInterval: 4)
        let client = try Watcher([ShapedLink.ip!, "netns", "exec", link.name, CLI.packageRoot + "/scripts/llhls-client",
                                  "--url", "http://127.0.0.1:\(port)/hls/out/master.m3u8", "--seconds", "35", "--adaptive"])
        Thread.sleep(forTimeInterval: 12)
        let narrowed = Date().timeIntervalSince1970 * 1000
        try link.set(megabits: 0.9)
        let seen = try client.result()
        let switches = seen["switches"] as? [[Any]] ?? [], stalls = seen["stalls"] as? [[Any]] ?? []
        let pictures = seen["pictures"] as? [[Double]] ?? []
        print("llhls adaptive client: \(pictures.count) pictures, switches \(switches) (narrowed at \(narrowed)), stalls \(stalls)")
        XCTAssertTrue(switches.contains { ($0.first as? Double ?? 0) > narrowed && "\($0.last ?? "")" == "180p" },
                      "the client switches to 180p once the link is narrow: \(switches)")
        XCTAssertTrue(stalls.isEmpty, "no stall over 1 s: \(stalls)")
        XCTAssertGreaterThanOrEqual(pictures.count, 30 * 30, "the pictures of 35 s, less the start")
        run.process.interrupt()
        _ = run.waitForExit(timeout: 20)
    }

    /// What a request may not ask, and how long one may wait: the specification's 400s, 404 for
    /// what left the window, a blocking reload answered when its part comes, and 503 after three
    /// target durations while the phone's stream is stopped (its publisher SIGSTOPped). A client that
    /// asks for the part being written and never reads is dropped; the run goes on.
    func testRefusalsHeldRequestsAndAClientThatNeverReads() throws {
        let dir = CLI.scratch(), rtmp = try LoopbackPort.free(), port = try LoopbackPort.free()
        try WhepTests.markedClip(dir + "/marks.mp4", seconds: 60)
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-i", dir + "/marks.mp4", "-c", "copy", dir + "/phone.flv"])
        CLI.write("""
            pipeline: phone
            nodes:
              src:   {type: rtmp, listen: true, idle: 30s, url: "rtmp://127.0.0.1:\(rtmp)/live/phone"}
              fit:   {type: resize, in: src.video, size: 640x360}
              video: {type: h264, in: fit, bitrate: 800k, bframes: 0, preset: ultrafast, tune: zerolatency, gop: 30, keyframes: fixed}
              audio: {type: aac, in: src.audio}
              out:   {type: hls, in: [video, audio], path: out/master.m3u8, segment: 1s, window: 3, low-latency: 200ms}
            """, to: dir + "/phone.pipe")
        try FileManager.default.createDirectory(atPath: dir + "/out", withIntermediateDirectories: true)
        let run = try BackgroundRun(["run", dir + "/phone.pipe", "--events", "json", "--http", "127.0.0.1:\(port)"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let base = "http://127.0.0.1:\(port)/hls/out/360p/"
        // Asked before the phone sends anything: held until the presentation begins.
        let early = Process()
        early.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        early.arguments = ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "index.m3u8"]
        let earlyOut = Pipe()
        early.standardOutput = earlyOut
        try early.run()
        Thread.sleep(forTimeInterval: 1)
        let publisher = Process()
        publisher.executableURL = URL(fileURLWithPath: CLI.packageRoot + "/scripts/rtmp-publish")
        publisher.arguments = [dir + "/phone.flv", "rtmp://127.0.0.1:\(rtmp)/live/phone"]
        try publisher.run()
        addTeardownBlock { if publisher.isRunning { kill(publisher.processIdentifier, SIGCONT); publisher.terminate() } }
        Thread.sleep(forTimeInterval: 8)
        early.waitUntilExit()
        XCTAssertEqual(String(decoding: earlyOut.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self), "200", "a request before the first packet is answered once it comes")

        let playlist = try Self.get(base + "index.m3u8")
        XCTAssertEqual(playlist.status, 200)
        let edge = try XCTUnwrap(Self.lastPart(playlist.body))
        XCTAssertEqual(try Self.get(base + "index.m3u8?_HLS_part=1").status, 400, "_HLS_part without _HLS_msn")
        XCTAssertEqual(try Self.get(base + "index.m3u8?_HLS_msn=\(edge.msn + 10)").status, 400, "more than two segments ahead")
        XCTAssertEqual(try Self.get(base + String(format: "seg_%05d.p0.m4s", edge.msn + 10)).status, 400, "a part far in the future")
        XCTAssertEqual(try Self.get(base + String(format: "seg_%05d.p40.m4s", edge.msn)).status, 400, "a part past any segment's last")
        XCTAssertEqual(try Self.get(base + "seg_x.m4s").status, 404)
        XCTAssertEqual(try Self.get("http://127.0.0.1:\(port)/hls/out/master.m3u8", method: "POST").status, 405)

        // The next segment's first part: held until it is written (a segment at most), then the playlist that has it.
        let now = try XCTUnwrap(Self.lastPart(try Self.get(base + "index.m3u8").body))
        let next = try Self.get(base + "index.m3u8?_HLS_msn=\(now.msn + 1)&_HLS_part=0")
        XCTAssertEqual(next.status, 200)
        XCTAssertLessThan(next.seconds, 1.3, "answered when the part came")
        XCTAssertTrue(next.body.contains(String(format: "seg_%05d.p0.m4s", now.msn + 1)), next.body)
        XCTAssertEqual(next.headers["access-control-allow-origin"], "*")
        let newestThen = try XCTUnwrap(Self.lastPart(next.body))
        XCTAssertTrue(next.body.contains(String(format: "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_%05d.p%d.m4s\"", newestThen.msn, newestThen.part + 1)),
                      "the hint names the part after the newest")

        // The first part of the segment after, asked before it exists: held, then streamed as it is written; it decodes after the init segment.
        let part = try Self.get(base + String(format: "seg_%05d.p0.m4s", newestThen.msn + 1))
        XCTAssertEqual(part.status, 200)
        XCTAssertEqual(part.headers["transfer-encoding"], "chunked", "a part being written streams")
        let initSegment = try Self.get(base + "init.mp4")
        _ = FileManager.default.createFile(atPath: dir + "/part.mp4", contents: initSegment.data + part.data)
        let frames = try CLI.shell(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", dir + "/part.mp4"])
        XCTAssertEqual(frames.trimmingCharacters(in: .whitespacesAndNewlines), "6", "a part of 200 ms holds 6 pictures")

        // A client that asks 20 times for a whole segment and never reads: the server lets it go.
        let silent = try Watcher(["/usr/bin/python3", "-c", Self.neverReads, "\(port)", "/hls/out/360p/" + String(format: "seg_%05d.m4s", newestThen.msn - 1)])

        // The phone stops sending: a request for what comes next waits three target durations, then 503.
        kill(publisher.processIdentifier, SIGSTOP)
        Thread.sleep(forTimeInterval: 0.5)
        let newest = try XCTUnwrap(Self.lastPart(try Self.get(base + "index.m3u8").body))
        let stalled = try Self.get(base + "index.m3u8?_HLS_msn=\(newest.msn + 1)&_HLS_part=0")
        XCTAssertEqual(stalled.status, 503, stalled.body)
        XCTAssertEqual(stalled.seconds, 3, accuracy: 0.5, "held three target durations of 1 s")
        kill(publisher.processIdentifier, SIGCONT)
        let resumed = try Self.get(base + "index.m3u8?_HLS_msn=\(newest.msn + 1)&_HLS_part=0")
        XCTAssertEqual(resumed.status, 200, "answered once the phone sends again")

        XCTAssertEqual(try Self.get(base + "seg_00000.m4s").status, 404, "a segment gone from the window of 3, and kept a window more")
        XCTAssertEqual(try Self.get(base + "seg_00000.p1.m4s").status, 404, "its part too")
        let silentSaw = try silent.result()
        XCTAssertEqual(silentSaw["closed_by_server"] as? Bool, true, "the silent client is dropped: \(silentSaw)")
        XCTAssertEqual(try Self.get(base + "index.m3u8").status, 200, "and the server still answers")
        publisher.terminate()
        run.process.interrupt()
        XCTAssertEqual(run.waitForExit(timeout: 20), 0, run.stderr)
    }

    /// Connects, asks 20 times for PATH and reads nothing; after 20 s says whether the server's
    /// side of the connection is still established (`ss`: a server that let it go is closing it or
    /// has, whatever is still in flight).
    static let neverReads = """
        import json, socket, subprocess, sys, time
        port = int(sys.argv[1])
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(("GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n" % sys.argv[2]).encode() * 20)
        time.sleep(20)
        mine = s.getsockname()[1]
        rows = subprocess.run(["ss", "-Htn", "state", "established", "( sport = :%d and dport = :%d )" % (port, mine)],
                              capture_output=True, text=True).stdout.strip()
        print(json.dumps({"closed_by_server": rows == "", "server_side": rows}))
        """

    struct Fetched {
        var status: Int
        var headers: [String: String]
        var data: Data
        var seconds: Double
        var body: String { String(decoding: data, as: UTF8.self) }
    }

    /// One request with curl (an independent client): status, headers (names lower-cased), body, time.
    static func get(_ url: String, method: String = "GET") throws -> Fetched {
        let dir = CLI.scratch("get-\(UUID().uuidString)")
        let started = Date()
        let status = try CLI.shell(["curl", "-s", "-X", method, "-o", dir + "/body", "-D", dir + "/head", "-w", "%{http_code}", "--max-time", "10", url])
        let seconds = Date().timeIntervalSince(started)
        var headers: [String: String] = [:]
        for line in (try? String(contentsOfFile: dir + "/head", encoding: .utf8))?.split(separator: "\r\n") ?? [] {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Fetched(status: Int(status) ?? -1, headers: headers, data: FileManager.default.contents(atPath: dir + "/body") ?? Data(), seconds: seconds)
    }

    /// The newest part a media playlist lists: (media sequence, part index).
    static func lastPart(_ playlist: String) -> (msn: Int, part: Int)? {
        guard let line = playlist.split(separator: "\n").last(where: { $0.hasPrefix("#EXT-X-PART:") }),
              let uri = line.split(separator: "\"").dropFirst().first else { return nil }
        // seg_00012.p3.m4s
        let numbers = uri.dropFirst(4).dropLast(4).split(separator: ".")
        guard numbers.count == 2, let msn = Int(numbers[0]), let part = Int(numbers[1].dropFirst()) else { return nil }
        return (msn, part)
    }
}
