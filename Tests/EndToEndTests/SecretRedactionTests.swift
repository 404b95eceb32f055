import AVGraphTesting
import Foundation
import XCTest

/// A stream key (the RTMP path after the application, SRT passphrase and streamid) never shows in
/// stdout, stderr or events, whether the server takes the stream or cannot be reached.
final class SecretRedactionTests: XCTestCase {
    static let key = "sk_live_7Qx9SECRETKEY42"

    func pipe(_ dir: String, url: String, duration: String) -> String {
        let path = dir + "/secret.pipe"
        CLI.write("""
        pipeline: secret\(UUID().uuidString.prefix(6).lowercased())
        realtime: true
        duration: \(duration)
        control: \(dir)/ctl/secret.sock
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          tone:   {type: tone, freq: 440, rate: 44100, channels: 2}
          video:  {type: h264, in: screen, preset: ultrafast, tune: zerolatency, bitrate: 500k}
          audio:  {type: aac, in: tone}
          live:   {type: \(url.hasPrefix("srt") ? "srt" : "rtmp"), in: [video, audio], url: "\(url)", reconnect: {attempts: 2, backoff: 200ms..400ms}}
        """, to: path)
        return path
    }

    func assertNoSecret(_ texts: [String], _ secrets: [String], file: StaticString = #filePath, line: UInt = #line) {
        for t in texts { for s in secrets { XCTAssertFalse(t.contains(s), "'\(s)' printed in: \(t.prefix(2000))", file: file, line: line) } }
    }

    func testRtmpKeyIsNotPrintedWhenTheServerTakesTheStream() throws {
        try XCTSkipUnless(NginxRtmp.isAvailable, "nginx with libnginx-mod-rtmp is not installed (scripts/setup installs it)")
        let nginx = try NginxRtmp()
        addTeardownBlock { nginx.stop() }
        let dir = CLI.scratch()
        let run = try BackgroundRun(["run", pipe(dir, url: nginx.url(Self.key), duration: "4s"), "--events", "json"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "control" })
        let get = try CLI.run(["ctl", dir + "/ctl/secret.sock", "get", "live.url"])
        XCTAssertEqual(get.status, 0, get.stderr)
        let reply = try JSONSerialization.jsonObject(with: Data(get.stdout.utf8)) as? [String: Any]
        XCTAssertEqual(reply?["value"] as? String, "rtmp://127.0.0.1:\(nginx.port)/live/***", get.stdout)
        let watch = try CLI.run(["ctl", dir + "/ctl/secret.sock", "watch"])
        XCTAssertEqual(run.waitForExit(), 0, run.stderr)
        nginx.stop()
        // The key did reach the server: nginx named its recording after the stream.
        let session = try XCTUnwrap(nginx.sessions.last, "nginx recorded nothing")
        XCTAssertTrue(session.contains(Self.key), session)
        XCTAssertGreaterThan(try CLI.videoFrameTimes(session).count, 60, "nginx received the pictures")
        let stdout = run.events.map { String(decoding: try! JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }.joined(separator: "\n")
        assertNoSecret([stdout, run.stderr, get.stdout, get.stderr, watch.stdout, watch.stderr], [Self.key])
    }

    func testRtmpKeyIsNotPrintedWhenTheServerCannotBeReached() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let r = try CLI.run(["run", pipe(dir, url: "rtmp://127.0.0.1:\(port)/live/\(Self.key)?token=\(Self.key)x", duration: "10s"),
                             "--events", "json"])
        XCTAssertEqual(r.status, 1, "the run fails after its attempts: \(r.stderr)")
        XCTAssertTrue(r.stderr.contains("rtmp://127.0.0.1:\(port)/live/***"), "the error says where, without the key: \(r.stderr)")
        XCTAssertTrue(r.stdout.contains("\"reconnecting\""), "events of the retries")
        assertNoSecret([r.stdout, r.stderr], [Self.key])
    }

    func testSrtPassphraseAndStreamIdAreNotPrinted() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let pass = "SrtPassphrase_91xz", sid = "publish:SECRETSTREAMID"
        let r = try CLI.run(["run", pipe(dir, url: "srt://127.0.0.1:\(port)?passphrase=\(pass)&streamid=\(sid)&latency=200000", duration: "10s"),
                             "--events", "json"])
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("passphrase=***&streamid=***&latency=200000"), r.stderr)
        assertNoSecret([r.stdout, r.stderr], [pass, "SECRETSTREAMID"])
    }
}
