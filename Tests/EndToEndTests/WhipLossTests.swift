import AVGraphTesting
import Foundation
import XCTest

/// WHIP over a lossy, slow link: a network namespace of the test's own, both ends on its
/// loopback. nftables drops 5 % of the datagrams to and from avgraph's media port at random (this
/// kernel has no netem), and the publisher reaches that port through a relay that holds each
/// datagram 40 ms (the answer advertises the relay, as a server behind a port forward would).
/// What is lost comes back by NACK; a picture that cannot be recovered costs the pictures up to
/// the keyframe a PLI asks for.
final class WhipLossTests: XCTestCase {
    func testFivePercentLossAnd40msRecoveredByNack() throws {
        try XCTSkipUnless(BondedLinks.isAvailable, "needs root, ip and nft")
        let dir = CLI.scratch(), port = 18_000 + Int.random(in: 0..<2000), relay = port + 1
        try FlashBeep.makeClip(dir + "/clip.mp4", seconds: WhipTests.seconds + 1, size: "640x360", busy: true)
        let ns = try ShapedLink.plain()
        addTeardownBlock { ns.remove() }
        // aiortc gathers no loopback candidate: an address of its own on a veth pair inside the
        // namespace (this kernel has no dummy interfaces); the traffic still goes over its loopback.
        try ns.exec([ShapedLink.ip!, "link", "add", "v0", "type", "veth", "peer", "name", "v1"])
        try ns.exec([ShapedLink.ip!, "addr", "add", "10.99.0.1/24", "dev", "v0"])
        for link in ["v0", "v1"] { try ns.exec([ShapedLink.ip!, "link", "set", link, "up"]) }
        let nft = ["/usr/sbin/nft", "/sbin/nft"].first { FileManager.default.isExecutableFile(atPath: $0) }!
        try ns.exec([nft, "add", "table", "inet", "loss"])
        try ns.exec([nft, "add", "chain", "inet", "loss", "in", "{ type filter hook input priority 0; }"])
        try ns.exec([nft, "add", "chain", "inet", "loss", "out", "{ type filter hook output priority 0; }"])
        try ns.exec([nft, "add", "rule", "inet", "loss", "in", "udp", "dport", "\(port)", "numgen", "random", "mod", "100", "<", "5", "counter", "drop"])
        try ns.exec([nft, "add", "rule", "inet", "loss", "out", "udp", "sport", "\(port)", "numgen", "random", "mod", "100", "<", "5", "counter", "drop"])
        let delay = try ns.start(["/usr/bin/env", "python3", "-c", BondedLinks.delayLineScript, "127.0.0.1", "\(relay)", "127.0.0.1", "\(port)", "40"])
        addTeardownBlock { delay.terminate() }

        CLI.write("""
            pipeline: whip-loss
            realtime: true
            nodes:
              src:   {type: whip, url: "whip://127.0.0.1:\(port)", keys: [phone-key], webrtc-host: "127.0.0.1:\(relay)", idle: 8s, timeout: 2s}
              fit:   {type: resize, in: src.video, size: 640x360, mode: fit}
              video: {type: h264, in: fit, bitrate: 2000k}
              mix:   {type: mixer, in: [src.audio], rate: 48000}
              audio: {type: aac, in: mix}
              out:   {type: file, in: [video, audio], path: out.mp4, overwrite: true}
            """, to: dir + "/loss.pipe")
        let run = try BackgroundRun(["run", dir + "/loss.pipe", "--events", "json"], cwd: dir, prefix: [ShapedLink.ip!, "netns", "exec", ns.name])
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let started = Date()
        let client: String
        do { client = try ns.exec(["/usr/bin/env", "python3", "-c", WhipTests.aiortc, "http://127.0.0.1:\(port)/whip/phone-key", dir + "/clip.mp4", "\(WhipTests.seconds)"]) } catch {
            XCTFail("aiortc failed after \(Date().timeIntervalSince(started)) s: \(error); the run: \(run.stderr) \(run.events.filter { $0["event"] as? String != "stats" })")
            return
        }
        print("whip loss: aiortc \(client.trimmingCharacters(in: .whitespacesAndNewlines))")
        let dropped = try ns.exec([nft, "list", "table", "inet", "loss"])
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)

        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        let holes = gaps.filter { $0 > 0.05 }
        let counters = dropped.split(separator: "\n").filter { $0.contains("counter") }.map { $0.trimmingCharacters(in: .whitespaces) }
        print("whip loss: \(times.count) pictures of \(WhipTests.seconds * 30) sent, longest gap \(String(format: "%.3f", gaps.max() ?? 0)) s, holes over 50 ms: \(holes.map { String(format: "%.3f", $0) }); nftables: \(counters)")
        XCTAssertGreaterThanOrEqual(times.count, WhipTests.seconds * 30 - 30, "NACK recovered what 5 % loss took")
        XCTAssertLessThan(gaps.max() ?? 1, 0.5, "where a picture was lost for good, the hole is under 0.5 s (the keyframe a PLI asked for)")
        // What avgraph sends back is little (answers, reports, NACKs): 5 % of it may be none in a run.
        XCTAssertFalse(counters.first { $0.contains("dport") }?.contains("packets 0 ") ?? true, "the link did lose the publisher's packets: \(counters)")
    }
}
