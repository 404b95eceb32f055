import AVGraphTesting
import Foundation
import XCTest

/// The operator page's server as a stranger meets it: a web page of another origin in the
/// operator's own browser, a name rebound to 127.0.0.1, clients that trickle their header, and
/// the page over TLS. Real chromium, real sockets, the run's recording checked after.
final class HttpDoorTests: XCTestCase {
    /// A run of pipelines/live.pipe with the page on a free loopback port.
    static func startRun(_ dir: String, seconds: Int, _ extra: [String] = []) throws -> (run: BackgroundRun, port: Int) {
        let port = try LoopbackPort.free()
        let run = try BackgroundRun(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http", "127.0.0.1:\(port)", "--duration", "\(seconds)s",
                                     "--events", "json", "--control", dir + "/ctl.sock", "--set", "out.path=\(dir)/live.mp4"] + extra)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "start" }, run.stderr)
        return (run, port)
    }

    private func status(_ url: String, _ extra: [String] = []) throws -> String {
        try CLI.shell(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5"] + extra + [url])
    }

    /// Both streams of the recording last `seconds` (ffprobe's reading).
    private func assertWhole(_ path: String, seconds: Double, file: StaticString = #filePath, line: UInt = #line) throws {
        let probe = try CLI.probe(path)
        for kind in ["video", "audio"] {
            let duration = Double(CLI.stream(probe, kind)?["duration"] as? String ?? "") ?? 0
            XCTAssertEqual(duration, seconds, accuracy: 0.3, "\(kind) of \(path)", file: file, line: line)
        }
    }

    func testAPageOfAnotherOriginSendingMalformedQueriesLeavesTheRunWhole() throws {
        let dir = CLI.scratch()
        let (run, port) = try Self.startRun(dir, seconds: 10)
        defer { if run.process.isRunning { run.process.terminate() } }
        // The stranger's page, served from another origin: another loopback port.
        let site = dir + "/site"
        try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
        CLI.write("""
        <!doctype html><title>elsewhere</title>
        <script>
        const base = "http://127.0.0.1:\(port)";
        const paths = ["/?=", "/?a=1&=&b=2", "/api/state?=", "/api/stats?=", "/?%", "/?a=%zz&&=&", "/api/preview.jpg?="];
        window.results = {}; window.left = paths.length * 2;
        const settle = (key, value) => { results[key] = value; left -= 1; };
        for (const p of paths) {
          const img = new Image();
          img.onload = () => settle("img " + p, img.naturalWidth);
          img.onerror = () => settle("img " + p, "error");
          img.src = base + p;
          fetch(base + p, { mode: "no-cors" }).then(() => settle("fetch " + p, "answered"), () => settle("fetch " + p, "failed"));
        }
        </script>
        """, to: site + "/index.html")
        let sitePort = try LoopbackPort.free()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-m", "http.server", String(sitePort), "--bind", "127.0.0.1", "--directory", site]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        let end = Date().addingTimeInterval(10)
        while Date() < end && !LoopbackPort.accepts(sitePort) { usleep(50_000) }
        // The preview exists from the first pictures on.
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "stats" && ($0["media_time"] as? Double ?? 0) > 2 })

        // The stranger's site by a name of its own (another site, as on the web), served from loopback.
        let chromium = OperatorPageTests.chromium.replacingOccurrences(
            of: #""--ignore-certificate-errors"]"#, with: #""--ignore-certificate-errors", "--host-resolver-rules=MAP stranger.test 127.0.0.1"]"#)
        XCTAssertNotEqual(chromium, OperatorPageTests.chromium)
        let seen = try XCTUnwrap(PythonWitness.run(chromium + """
        try:
            d.get(sys.argv[1])
            until(lambda: d.execute_script("return window.left === 0"), 15)
            out = d.execute_script("return window.results")
        finally:
            d.quit()
        print(json.dumps(out))
        """, ["http://stranger.test:\(sitePort)/"]) as? [String: Any])
        print("another origin's requests: \(seen)")
        XCTAssertEqual(seen.count, 14, "every request settled: \(seen)")
        for key in seen.keys where key.hasPrefix("fetch ") && key != "fetch /api/preview.jpg?=" {
            XCTAssertEqual(seen[key] as? String, "answered", "\(key): the run's server answered")
        }
        // The preview is the run's own: another site's <img> may not show it (Cross-Origin-Resource-Policy).
        XCTAssertEqual(seen["img /api/preview.jpg?="] as? String, "error", "another site showed the preview")

        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        XCTAssertTrue(run.events.contains { $0["event"] as? String == "eos" }, run.stderr)
        try assertWhole(dir + "/live.mp4", seconds: 10)
    }

    func testForeignHostGetsNothingAndAForeignOriginCannotCommand() throws {
        let dir = CLI.scratch()
        let metricsPort = try LoopbackPort.free()
        let (run, port) = try Self.startRun(dir, seconds: 8, ["--http-host", "studio.test", "--metrics", "127.0.0.1:\(metricsPort)"])
        defer { if run.process.isRunning { run.process.terminate() } }
        let base = "http://127.0.0.1:\(port)"
        let page = try CLI.shell(["curl", "-s", "--max-time", "5", base + "/"])
        let token = try XCTUnwrap(page.range(of: #"const token = "[0-9a-f]{32}""#, options: .regularExpression).map { String(page[$0].dropFirst(15).dropLast()) })

        // A name rebound to 127.0.0.1: the page, its API and its metrics are not served under it.
        for path in ["/", "/api/stats", "/api/preview.jpg", "/metrics"] {
            let foreign = try CLI.shell(["curl", "-s", "-i", "--max-time", "5", "-H", "Host: attacker.example:\(port)", base + path])
            XCTAssertTrue(foreign.hasPrefix("HTTP/1.1 421"), "\(path): \(foreign)")
            XCTAssertFalse(foreign.contains(token) || foreign.contains("<html"), "\(path): \(foreign)")
        }
        XCTAssertEqual(try status("http://127.0.0.1:\(metricsPort)/metrics", ["-H", "Host: attacker.example:\(metricsPort)"]), "421")
        XCTAssertEqual(try status("http://127.0.0.1:\(metricsPort)/metrics", ["-H", "Host: localhost:\(metricsPort)"]), "200")
        // The names it has: loopback, its address, and --http-host.
        for host in ["localhost:\(port)", "127.0.0.1:\(port)", "studio.test:\(port)", "STUDIO.test"] {
            XCTAssertEqual(try status(base + "/", ["-H", "Host: \(host)"]), "200", host)
        }

        // Privacy on through the control socket; then a command with the token from another origin.
        let on = try CLI.run(["ctl", dir + "/ctl.sock", "set", "privacy.enabled", "true"])
        XCTAssertEqual(on.status, 0, on.stderr)
        let off = ["-X", "POST", "-H", "X-Avgraph-Token: \(token)", "-H", "Content-Type: application/json",
                   "-d", #"{"cmd":"set","node":"privacy","option":"enabled","value":false}"#]
        XCTAssertEqual(try status(base + "/api/ctl", off + ["-H", "Origin: http://attacker.example:\(port)"]), "403")
        XCTAssertEqual(try status(base + "/api/ctl", off + ["-H", "Origin: http://127.0.0.1:\(port + 1)"]), "403", "another port is another origin")
        XCTAssertEqual(try status(base + "/api/ctl", off + ["-H", "Origin: null"]), "403")
        XCTAssertEqual(try status(base + "/api/ctl", off + ["-H", "Origin: http://attacker.example:\(port)", "-H", "Host: attacker.example:\(port)"]), "421")
        let still = try CLI.run(["ctl", dir + "/ctl.sock", "get", "privacy.enabled"])
        XCTAssertTrue(still.stdout.contains("true"), "privacy stays on: \(still.stdout) \(still.stderr)")
        // The page's own origin may.
        let same = ["-X", "POST", "-H", "X-Avgraph-Token: \(token)", "-H", "Origin: http://127.0.0.1:\(port)",
                    "-d", #"{"cmd":"get","node":"privacy","option":"enabled"}"#]
        XCTAssertEqual(try status(base + "/api/ctl", same), "200")

        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        let applied = run.events.filter { $0["event"] as? String == "applied" && $0["node"] as? String == "privacy" }
        XCTAssertEqual(applied.count, 1, "only the socket's change was applied: \(applied)")
        // The recording from the change on shows the card to the end: nothing turned it off.
        let on0 = try XCTUnwrap(applied.first?["media_time"] as? Double)
        let times = try CLI.videoFrameTimes(dir + "/live.mp4")
        let frames = try HlsWitness.grayPictures(dir + "/live.mp4", width: 64, height: 36)
        let isCard = { (f: [UInt8]) in abs(Int(f[1 * 64 + 1]) - 40) < 14 && f[14 * 64 + 29] > 180 }
        let after = zip(times, frames).filter { $0.0 >= on0 + 0.001 }
        XCTAssertGreaterThan(after.count, 30)
        XCTAssertTrue(after.allSatisfy { isCard($0.1) }, "every picture from \(on0) s to the end shows the card")
    }

    /// 300 clients that each send a header line every 3 s and never finish: the next visitor is
    /// served at once, and the trickling ones are closed by the 10 s deadline.
    static let trickle = #"""
import http.client, json, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
for s in socks: s.setblocking(False)
def closed(s):
    try: return s.recv(1) == b""
    except BlockingIOError: return False
    except OSError: return True
def send(line):
    for s in socks:
        try: s.send(line)
        except OSError: pass
start = time.time()
send(b"GET / HTTP/1.1\r\n")
out = {}
for k in range(1, 6):
    time.sleep(3)
    send(b"X-Slow-%d: 1\r\n" % k)
    if k == 1:
        t0 = time.time()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/")
        r = c.getresponse()
        body = r.read()
        out["status"], out["seconds"], out["bytes"] = r.status, time.time() - t0, len(body)
        out["open_beside"] = sum(not closed(s) for s in socks)
out["closed_after"] = time.time() - start
out["closed"] = sum(closed(s) for s in socks)
print(json.dumps(out))
"""#

    func testTricklingClientsDoNotShutThePageOut() throws {
        let dir = CLI.scratch()
        let (run, port) = try Self.startRun(dir, seconds: 40, ["--http-connections", "64"])
        defer { if run.process.isRunning { run.process.terminate() } }
        let seen = try XCTUnwrap(PythonWitness.run(Self.trickle, [String(port), "300"]) as? [String: Any])
        print("beside 300 trickling clients: \(seen)")
        XCTAssertEqual(seen["status"] as? Int, 200)
        XCTAssertGreaterThan(seen["bytes"] as? Int ?? 0, 5000, "the page itself")
        XCTAssertLessThan(try XCTUnwrap(seen["seconds"] as? Double), 2)
        // The longest waiting made room (64 places: the visitor's and 63 others), and after ~15 s
        // the 10 s deadline had closed every one.
        XCTAssertLessThanOrEqual(seen["open_beside"] as? Int ?? 300, 63)
        XCTAssertEqual(seen["closed"] as? Int, 300)
        XCTAssertEqual(try CLI.run(["ctl", dir + "/ctl.sock", "stop"]).status, 0)
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
    }

    func testPageOverTLSOpensInChromiumWithItsPreview() throws {
        let dir = CLI.scratch()
        let (cert, key) = (dir + "/cert.pem", dir + "/key.pem")
        _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                           "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        let (run, port) = try Self.startRun(dir, seconds: 10, ["--http-tls", "\(cert),\(key)"])
        defer { if run.process.isRunning { run.process.terminate() } }
        XCTAssertTrue(run.stderr.contains("operator page: https://127.0.0.1:\(port)/"), run.stderr)
        XCTAssertNotEqual(try status("http://127.0.0.1:\(port)/"), "200", "no page in clear at a TLS port")
        // AVGRAPH_SCREENSHOTS=1 writes the docs' picture; otherwise it stays in the scratch folder.
        let shot = ProcessInfo.processInfo.environment["AVGRAPH_SCREENSHOTS"] == "1" ? CLI.packageRoot + "/docs/operator-page-tls.png" : dir + "/tls.png"
        // The stranger's site by a name of its own (another site, as on the web), served from loopback.
        let chromium = OperatorPageTests.chromium.replacingOccurrences(
            of: #""--ignore-certificate-errors"]"#, with: #""--ignore-certificate-errors", "--host-resolver-rules=MAP stranger.test 127.0.0.1"]"#)
        XCTAssertNotEqual(chromium, OperatorPageTests.chromium)
        let seen = try XCTUnwrap(PythonWitness.run(chromium + """
        out = {}
        try:
            d.get(sys.argv[1])
            out["state"] = until(lambda: d.find_element("id", "state").text if d.find_element("id", "state").text == "running" else None, 10)
            out["preview_width"] = until(lambda: d.execute_script("const i = document.getElementById('preview'); return i.complete ? i.naturalWidth : 0"), 10)
            out["scheme"] = d.execute_script("return location.protocol")
            d.save_screenshot(sys.argv[2])
        finally:
            d.quit()
        print(json.dumps(out))
        """, ["https://127.0.0.1:\(port)/", shot]) as? [String: Any])
        print("the page over TLS: \(seen)")
        XCTAssertEqual(seen["state"] as? String, "running")
        XCTAssertEqual(seen["preview_width"] as? Int, 640, "the preview picture loaded over https")
        XCTAssertEqual(seen["scheme"] as? String, "https:")
        XCTAssertTrue(FileManager.default.fileExists(atPath: shot))
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        try assertWhole(dir + "/live.mp4", seconds: 10)
    }

    func testACertificateThatWillNotLoadIsAStartErrorNamingTheFile() throws {
        let dir = CLI.scratch()
        let (cert, key) = (dir + "/cert.pem", dir + "/key.pem")
        _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=x"])
        _ = try CLI.shell(["openssl", "genrsa", "-out", dir + "/other.pem", "2048"])
        let cases = [("\(dir)/missing.pem,\(key)", "\(dir)/missing.pem: cannot read the certificate: no such file"),
                     ("\(key),\(key)", "\(key): not a PEM certificate"),
                     ("\(cert),\(cert)", "\(cert): not a PEM private key"),
                     ("\(cert),\(dir)/other.pem", "\(dir)/other.pem: not the private key of \(cert)")]
        for (files, message) in cases {
            let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http", "127.0.0.1:0", "--http-tls", files,
                                 "--duration", "1s", "--set", "out.path=\(dir)/x.mp4"])
            XCTAssertEqual(r.status, 1, r.stderr)
            XCTAssertTrue(r.stderr.contains("--http-tls: \(message)"), r.stderr)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/x.mp4"), "nothing recorded")
        let usage = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http-tls", "\(cert),\(key)"])
        XCTAssertEqual(usage.status, 2)
        XCTAssertTrue(usage.stderr.contains("--http-tls and --http-host go with --http"), usage.stderr)
    }
}
