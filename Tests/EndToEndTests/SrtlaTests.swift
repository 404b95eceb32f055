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
        usleep(300_000)
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
        XCTAssertEqual(m.videoTimes.count, Self.seconds * 30, "every picture of the bonded stream is recorded")
        FlashBeep.assertInSync(m, atLeast: Self.seconds - 1, tolerance: 1.0 / 30)
        for l in links { XCTAssertGreaterThan(l["sent"] as? Int ?? 0, 0, "every link carried packets: \(l)") }
        XCTAssertLessThan(plainPictures, Self.seconds * 30 - 150, "plain SRT over the link cut for 10 s loses pictures")
    }
}
