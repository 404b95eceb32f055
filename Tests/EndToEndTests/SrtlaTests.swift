import AVGraphTesting
import Foundation
import XCTest

/// SRTLA: a sender bonding several links into `avgraph serve --listen srtla://`, each link its
/// own veth pair between two namespaces (see BondedLinks: lossy, slow, cut and restored); the
/// sender is `scripts/srtla-send`, written from the protocol's description. Judged on the
/// recording: every picture, flashes on their beeps.
final class SrtlaTests: XCTestCase {
    static let seconds = 30

    /// A template recording each session to `rec/{key}-{session}.mp4`.
    static func template(_ dir: String) -> String {
        let path = dir + "/serve.pipe"
        CLI.write("""
            pipeline: bonded
            nodes:
              src: {type: publisher, idle: 5s, size: 640x360}
              fit: {type: resize, in: src.video, size: 640x360, mode: fit, queue: {size: 60, policy: block}}
              v: {type: h264, in: fit, preset: ultrafast, queue: {size: 60, policy: block}}
              a: {type: aac, in: src.audio}
              out: {type: file, in: [v, a], path: "rec/{key}-{session}.mp4"}
            """, to: path)
        try? FileManager.default.createDirectory(atPath: dir + "/rec", withIntermediateDirectories: true)
        return path
    }

    func testThreeLinksLossySlowAndCutRecordEveryPicture() throws {
        try XCTSkipUnless(BondedLinks.isAvailable, "needs root, ip and nft (network namespaces)")
        let dir = CLI.scratch()
        let clip = dir + "/clip.mp4"
        try FlashBeep.makeClip(clip, seconds: Self.seconds, size: "640x360")
        // Link 3 is cut from 10 s to 20 s: plain SRT over it alone is the comparison.
        let net = try BondedLinks(links: 3, plainLink: 3)
        addTeardownBlock { net.remove() }
        try net.setLoss(1, percent: 10)
        let slow = try net.delayLine(2, port: 5002, to: 5000, ms: 150)
        addTeardownBlock { if slow.isRunning { kill(slow.processIdentifier, SIGKILL) } }

        let serve = try BackgroundRun(["serve", Self.template(dir), "--listen", "srtla://0.0.0.0:5000", "--listen", "srt://0.0.0.0:9000", "--open"],
                                      cwd: dir, prefix: [ShapedLink.ip!, "netns", "exec", net.receiver])
        addTeardownBlock {
            for (pid, _) in ServeTests.runs(of: serve.process.processIdentifier) { kill(pid, SIGKILL) }
            if serve.process.isRunning { kill(serve.process.processIdentifier, SIGKILL) }
        }
        XCTAssertTrue(ServeTests.waitFor(timeout: 15) { serve.stderr.components(separatedBy: "listening on").count > 2 }, serve.stderr)

        let figures = Pipe()
        let sender = try net.start(in: net.sender, [CLI.packageRoot + "/scripts/srtla-send", "--listen", "127.0.0.1:6000", "--to", "\(net.server):5000",
                                                    "--link", net.senderAddress(1), "--link", "\(net.senderAddress(2))=\(net.receiverAddress(2)):5002", "--link", net.senderAddress(3)],
                                   output: figures.fileHandleForWriting)
        addTeardownBlock { if sender.isRunning { kill(sender.processIdentifier, SIGKILL) } }
        // The caller's SRT handshake gives up after 3 s: it starts once the links are registered.
        XCTAssertTrue(ServeTests.waitFor(timeout: 15) { serve.stderr.components(separatedBy: ": joined ").count > 3 }, serve.stderr)
        let ffmpeg = ["ffmpeg", "-v", "error", "-re", "-i", clip, "-c", "copy", "-f", "mpegts"]
        let bonded = try net.start(in: net.sender, ["/usr/bin/env"] + ffmpeg + ["srt://127.0.0.1:6000?streamid=bonded&latency=2000000"])
        let plain = try net.start(in: net.sender, ["/usr/bin/env"] + ffmpeg + ["srt://\(net.server):9000?streamid=plain"])
        addTeardownBlock { for p in [bonded, plain] where p.isRunning { kill(p.processIdentifier, SIGKILL) } }

        usleep(10_000_000)
        try net.setLoss(3, percent: 100)
        usleep(10_000_000)
        try net.setLoss(3, percent: 0)
        bonded.waitUntilExit()
        plain.waitUntilExit()
        sender.terminate()
        sender.waitUntilExit()
        try figures.fileHandleForWriting.close()
        let sent = try JSONSerialization.jsonObject(with: figures.fileHandleForReading.readDataToEndOfFile()) as? [String: Any]
        let links = sent?["links"] as? [[String: Any]] ?? []
        XCTAssertEqual(links.count, 3, "the sender's figures: \(String(describing: sent))")

        // Each session's run ends 5 s after its publisher (idle): then serve is stopped.
        XCTAssertTrue(ServeTests.waitFor(timeout: 30) { ServeTests.runs(of: serve.process.processIdentifier).isEmpty }, serve.stderr)
        kill(serve.process.processIdentifier, SIGTERM)
        XCTAssertEqual(serve.waitForExit(timeout: 20), 0, serve.stderr)

        let recordings = try FileManager.default.contentsOfDirectory(atPath: dir + "/rec")
        guard let bondedFile = recordings.first(where: { $0.hasPrefix("bonded-") }) else { return XCTFail("no bonded recording: \(recordings)\n\(serve.stderr)") }
        let m = try FlashBeep.measure(dir + "/rec/" + bondedFile)
        let plainPictures = try recordings.filter { $0.hasPrefix("plain-") }.map { try CLI.videoFrameTimes(dir + "/rec/" + $0).count }.reduce(0, +)
        let shares = links.map { "\($0["link"] ?? "?"): \(Int((($0["share"] as? Double ?? 0) * 100).rounded())) % (\($0["sent"] ?? 0) sent, \($0["lost"] ?? 0) reported lost)" }
        print("srtla: \(m.videoTimes.count) of \(Self.seconds * 30) pictures over 3 bonded links [\(shares.joined(separator: ", "))]; "
              + "plain SRT over the cut link alone: \(plainPictures) pictures; flash minus beep median \(FlashBeep.ms(FlashBeep.figures(m).median)) ms, "
              + "worst \(FlashBeep.ms(m.offsets.map(abs).max() ?? .nan)) ms")
        print(serve.stderr)
        let holes = zip(m.videoTimes, m.videoTimes.dropFirst()).filter { $1 - $0 > 1.5 / 30 }.map { String(format: "%.2f-%.2f s", $0, $1) }
        XCTAssertEqual(m.videoTimes.count, Self.seconds * 30, "every picture of the bonded stream is recorded; holes: \(holes)")
        FlashBeep.assertInSync(m, atLeast: Self.seconds - 1, tolerance: 1.0 / 30)
        for l in links { XCTAssertGreaterThan(l["sent"] as? Int ?? 0, 0, "every link carried packets: \(l)") }
        XCTAssertLessThan(plainPictures, Self.seconds * 30 - 150, "plain SRT over the link cut for 10 s loses pictures")
    }

    /// What a hostile or broken sender does to a receiver with a bonded stream running: an id
    /// never issued, 8 links where the limit is 4, 10 000 registrations in a second, garbage.
    static let hostile = """
        import json, os, socket, struct, sys, time
        to = ("127.0.0.1", int(sys.argv[1]))
        def sock():
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); s.settimeout(1); return s
        def kind(data): return struct.unpack(">H", data[:2])[0]
        out = {}
        s = sock(); s.sendto(struct.pack(">H", 0x9201) + os.urandom(256), to); out["unknown_group"] = kind(s.recv(600))
        first = sock(); first.sendto(struct.pack(">H", 0x9200) + os.urandom(128) + bytes(128), to)
        group = first.recv(600)[2:]
        answers = []
        for link in [first] + [sock() for _ in range(7)]:
            link.sendto(struct.pack(">H", 0x9201) + group, to); answers.append(kind(link.recv(600)))
        out["joined"] = answers.count(0x9202); out["refused"] = answers.count(0x9210)
        flood = sock(); flood.setblocking(False)
        start = time.monotonic()
        for i in range(10000):
            try: flood.sendto(struct.pack(">H", 0x9200) + os.urandom(128) + bytes(128), to)
            except BlockingIOError: time.sleep(0.001)
        out["flood_seconds"] = time.monotonic() - start
        time.sleep(0.5)
        answered = 0
        while True:
            try: flood.recv(600); answered += 1
            except BlockingIOError: break
        out["flood_answered"] = answered
        junk = sock()
        for i in range(1000): junk.sendto(os.urandom(1 + i % 1400), to)
        print(json.dumps(out))
        """

    /// A run recording `srtla://127.0.0.1:PORT` (its source's `options` added), srtla-send bonding
    /// three loopback links into it once it listens, and ffmpeg publishing ServeTests' clip through
    /// them once they are registered (the caller's SRT handshake gives up after 3 s).
    func startBonded(_ dir: String, port: Int, options: String = "", runArguments: [String] = []) throws -> (BackgroundRun, Process, Process) {
        CLI.write("""
            pipeline: bonded
            realtime: true
            nodes:
              src: {type: srt, url: "srtla://127.0.0.1:\(port)", listen: true, \(options)idle: 10s, size: 320x240}
              fit: {type: resize, in: src.video, size: 320x240}
              v: {type: h264, in: fit, preset: ultrafast}
              a: {type: aac, in: src.audio}
              out: {type: file, in: [v, a], path: out.mp4, overwrite: true}
            """, to: dir + "/bonded.pipe")
        let run = try BackgroundRun(["run", dir + "/bonded.pipe", "--events", "json"] + runArguments, cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let local = try LoopbackPort.free(), stats = dir + "/links.json"
        let sender = try PublisherVanishTests.spawn(CLI.packageRoot + "/scripts/srtla-send", ["--listen", "127.0.0.1:\(local)", "--to", "127.0.0.1:\(port)", "--stats", stats,
                                                                                            "--link", "127.0.0.1", "--link", "127.0.0.1", "--link", "127.0.0.1"])
        addTeardownBlock { if sender.isRunning { kill(sender.processIdentifier, SIGKILL) } }
        XCTAssertTrue(Self.registered(stats), "srtla-send registered its 3 links")
        let publisher = try ServeTests.publish("srt://127.0.0.1:\(local)?streamid=phone&latency=2000000")
        addTeardownBlock { if publisher.isRunning { kill(publisher.processIdentifier, SIGKILL) } }
        return (run, sender, publisher)
    }

    /// Whether srtla-send's figures (`--stats FILE`) say all its links are registered, waiting up to 15 s.
    static func registered(_ stats: String, links: Int = 3) -> Bool {
        ServeTests.waitFor(timeout: 15) {
            let figures = (try? Data(contentsOf: URL(fileURLWithPath: stats))).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
            return (figures?["links"] as? [[String: Any]])?.filter { $0["registered"] as? Bool == true }.count == links
        }
    }

    func testRefusedRegistrationsLeaveTheRunningGroupAlone() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let (run, sender, publisher) = try startBonded(dir, port: port, options: "srtla-links: 4, ")
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "publisher" }, run.stderr)

        let figures = try PythonWitness.run(Self.hostile, ["\(port)"]) as? [String: Any] ?? [:]
        print("srtla refusals: \(figures)")
        XCTAssertEqual(figures["unknown_group"] as? Int, 0x9211, "an id never issued: REG_NGP")
        XCTAssertEqual(figures["joined"] as? Int, 4)
        XCTAssertEqual(figures["refused"] as? Int, 4, "links past srtla-links: REG_ERR")
        XCTAssertLessThanOrEqual(figures["flood_answered"] as? Int ?? .max, 200 + 200, "registrations answered at most 200 a second")

        publisher.waitUntilExit()
        sender.terminate()
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let pictures = try CLI.videoFrameTimes(dir + "/out.mp4").count
        let warnings = run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String }
        // While the stream was live (its sender's links go silent after it and leave 10 s later).
        let live = run.events.prefix { !($0["event"] as? String == "publisher" && $0["state"] as? String == "disconnected") }
        let links = live.filter { $0["event"] as? String == "srtla" && $0["group"] as? Int == 1 }.last?["links"] as? [[String: Any]]
        print("srtla: \(pictures) pictures recorded beside the refusals; warnings: \(warnings)")
        XCTAssertEqual(pictures, Int(ServeTests.seconds) * 30, "the bonded stream recorded whole")
        XCTAssertEqual(links?.count, 3, "the sender's group kept its 3 links")
        for what in ["REG_NGP", "has 4 links already (REG_ERR)", "registrations a second"] {
            XCTAssertTrue(warnings.contains { $0.contains(what) }, "a warning says \(what): \(warnings)")
        }
    }

    /// The operator's page of a run receiving a bonded stream, in chromium: the links table.
    static let linksPage = OperatorPageTests.chromium + #"""
url, shot = sys.argv[1], sys.argv[2]
out = {}
ROWS = "return [...document.querySelectorAll('#links tbody tr')].map((r) => [...r.children].map((c) => c.textContent))"
try:
    d.get(url)
    out["rows"] = until(lambda: (r := d.execute_script(ROWS)) and len(r) == 3 and all(int(c[1]) > 0 for c in r) and r, 15)
    out["visible"] = d.find_element(By.ID, "links-section").is_displayed()
    d.save_screenshot(shot)
finally:
    d.quit()
print(json.dumps(out))
"""#

    func testThePageShowsEachLink() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free(), http = try LoopbackPort.free()
        let (run, sender, publisher) = try startBonded(dir, port: port, runArguments: ["--http", "127.0.0.1:\(http)"])
        // AVGRAPH_SCREENSHOTS=1 writes the docs' picture; otherwise it stays in the scratch folder.
        let shot = ProcessInfo.processInfo.environment["AVGRAPH_SCREENSHOTS"] == "1" ? CLI.packageRoot + "/docs/operator-page-srtla.png" : dir + "/links.png"
        let page = try PythonWitness.run(Self.linksPage, ["http://127.0.0.1:\(http)/", shot]) as? [String: Any] ?? [:]
        print("srtla page: \(page)")
        let rows = page["rows"] as? [[String]] ?? []
        XCTAssertEqual(rows.count, 3, "a row per link: \(page)")
        XCTAssertEqual(page["visible"] as? Bool, true)
        for row in rows {
            XCTAssertTrue(row[0].hasPrefix("127.0.0.1:"), "the link's address: \(row)")
            XCTAssertTrue(row[2].hasSuffix("%") && row[3].hasSuffix("s ago"), "share and last heard: \(row)")
        }
        publisher.waitUntilExit()
        sender.terminate()
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
    }
}

