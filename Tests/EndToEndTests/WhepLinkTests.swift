import AVGraphTesting
import Foundation
import XCTest

/// One WHEP viewer behind a narrow link must not slow the others: three GStreamer viewers of a
/// 2.5 Mbit/s stream in a network namespace of the test's own, one of them behind 1 Mbit/s
/// (`tc` on the namespace's loopback, by its UDP port). The two others decode every picture;
/// the narrow one gets what its link carries, pictures dropped to the next keyframe for it alone.
final class WhepLinkTests: XCTestCase {
    func testASlowViewerDoesNotSlowTheOthers() throws {
        try XCTSkipUnless(ShapedLink.isAvailable, "needs root, ip and tc")
        let dir = CLI.scratch(), seconds = 20, slowPort = 40_000, port = 18_300
        // A busy picture (noise over a test pattern), so 2.5 Mbit/s is what the encoder really makes.
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=640x360:r=30:d=\(seconds + 15),noise=alls=30:allf=t",
                           "-c:v", "libx264", "-preset", "veryfast", "-b:v", "8M", "-bf", "0", "-pix_fmt", "yuv420p", dir + "/busy.mp4"])
        CLI.write("""
            pipeline: slow
            nodes:
              src:   {type: file, path: busy.mp4}
              video: {type: h264, in: src.video, bitrate: 2500k, bframes: 0, preset: ultrafast, tune: zerolatency, gop: 60}
              out:   {type: whep, in: video, viewers: open}
            """, to: dir + "/slow.pipe")
        let link = try ShapedLink.plain()
        addTeardownBlock { link.remove() }
        let tc = "/usr/sbin/tc"
        try link.exec([tc, "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "20", "r2q", "1000"])
        try link.exec([tc, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb"] + ShapedLink.rate(1))
        try link.exec([tc, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit"])
        try link.exec([tc, "qdisc", "add", "dev", "lo", "parent", "1:10", "handle", "10:", "bfifo", "limit", "40000"])
        try link.exec([tc, "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "u32", "match", "ip", "protocol", "17", "0xff",
                       "match", "ip", "dport", "\(slowPort)", "0xffff", "flowid", "1:10"])
        let run = try BackgroundRun(["run", dir + "/slow.pipe", "--events", "json", "--http", "127.0.0.1:\(port)"], cwd: dir,
                                    prefix: [ShapedLink.ip!, "netns", "exec", link.name])
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "start" }, run.stderr)
        let url = "http://127.0.0.1:\(port)/whep/out"
        var outputs: [(Process, Pipe)] = []
        for viewerPort in [slowPort, 0, 0] {
            let pipe = Pipe()
            let p = try link.start([CLI.packageRoot + "/scripts/whep-gst", "--url", url, "--seconds", "\(seconds)"]
                                   + (viewerPort == 0 ? [] : ["--port", "\(viewerPort)"]), output: pipe.fileHandleForWriting)
            outputs.append((p, pipe))
        }
        var results: [[String: Any]] = []
        for (p, pipe) in outputs {
            p.waitUntilExit()
            try pipe.fileHandleForWriting.close()
            let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            results.append((try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? ["failed": text])
        }
        let stats = try link.exec([tc, "-s", "class", "show", "dev", "lo"])
        print("whep behind 1 Mbit/s: slow viewer \(results[0]); the others \(results[1]), \(results[2])")
        print("tc: " + stats.split(separator: "\n").filter { $0.contains("Sent") || $0.contains("class htb") }.joined(separator: " | "))
        for fast in results.dropFirst() {
            XCTAssertGreaterThanOrEqual(fast["pictures"] as? Int ?? 0, seconds * 30 * 97 / 100, "a viewer on a clear link decodes every picture: \(fast)")
        }
        let slow = results[0]["pictures"] as? Int ?? 0
        XCTAssertLessThan(slow, seconds * 30 * 9 / 10, "the narrow viewer cannot have had every picture of a 2.5 Mbit/s stream over 1 Mbit/s")
        run.process.interrupt()
        _ = run.waitForExit(timeout: 20)
    }
}
