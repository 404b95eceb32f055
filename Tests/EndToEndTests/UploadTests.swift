import AVGraphTesting
import Foundation
import XCTest

/// A real HTTP server on loopback (Python's http.server, started by the test): GET serves its
/// folder; PUT and POST store the body under `received/` after failing the first `fail` requests
/// with 503, and note the request's headers.
final class LoopbackHTTP: @unchecked Sendable {
    let dir: String
    let port: Int
    private let process = Process()

    /// `tls`: HTTPS with a self-signed certificate for localhost/127.0.0.1 (`dir`/cert.pem).
    init(failFirst fail: Int = 0, tls: Bool = false) throws {
        dir = CLI.scratch("http")
        port = try LoopbackPort.free()
        try FileManager.default.createDirectory(atPath: dir + "/received", withIntermediateDirectories: true)
        CLI.write("""
        import http.server, os, sys, json
        port, root, fail = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
        count = [0]
        class H(http.server.SimpleHTTPRequestHandler):
            def __init__(s, *a, **k): super().__init__(*a, directory=root, **k)
            def do_PUT(s):
                count[0] += 1
                left = int(s.headers['Content-Length'])
                name = os.path.join(root, 'received', s.command + s.path.replace('/', '_'))
                with open(name, 'wb') as f:
                    while left:
                        c = s.rfile.read(min(left, 1 << 16))
                        if not c: break
                        f.write(c); left -= len(c)
                if count[0] <= fail:
                    os.remove(name); s.send_response(503); s.end_headers(); return
                with open(name + '.headers', 'w') as f: json.dump(dict(s.headers), f)
                s.send_response(201); s.end_headers()
            do_POST = do_PUT
            def log_message(s, *a): pass
        srv = http.server.ThreadingHTTPServer(('127.0.0.1', port), H)
        if len(sys.argv) > 4:
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(root, 'cert.pem'), os.path.join(root, 'key.pem'))
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        srv.serve_forever()
        """, to: dir + "/server.py")
        if tls {
            _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem",
                               "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", dir + "/server.py", String(port), dir, String(fail)] + (tls ? ["tls"] : [])
        process.standardError = FileHandle.nullDevice
        try process.run()
        let end = Date().addingTimeInterval(10)
        while Date() < end && !LoopbackPort.accepts(port) { usleep(50_000) }
    }

    func url(_ path: String, tls: Bool = false) -> String { "\(tls ? "https://localhost" : "http://127.0.0.1"):\(port)\(path)" }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

final class UploadTests: XCTestCase {
    static func pipe(upload: String) -> String {
        """
        pipeline: upload-test
        duration: 2s
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          app:    {type: tone, freq: 440}
          video:  {type: h264, in: screen}
          audio:  {type: aac, in: app}
          out:    {type: file, in: [video, audio], path: out.mp4, upload: \(upload)}
        """
    }

    func testFinishedRecordingArrivesByteIdenticalAfterARetry() throws {
        let server = try LoopbackHTTP(failFirst: 1)
        addTeardownBlock { server.stop() }
        let dir = CLI.scratch()
        CLI.write(Self.pipe(upload: "{url: \"\(server.url("/up/rec.mp4"))\", method: PUT, headers: {Authorization: Bearer t0ken}, attempts: 3}"),
                  to: dir + "/up.pipe")
        let r = try CLI.run(["run", dir + "/up.pipe", "--events", "json"], timeout: 120)
        XCTAssertEqual(r.status, 0, r.stderr)
        let local = try Data(contentsOf: URL(fileURLWithPath: dir + "/out.mp4"))
        let received = try Data(contentsOf: URL(fileURLWithPath: server.dir + "/received/PUT_up_rec.mp4"))
        XCTAssertGreaterThan(local.count, 10_000)
        XCTAssertEqual(received, local, "the server got the finished file, byte for byte")
        let events = r.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let uploaded = try XCTUnwrap(events.first { $0["event"] as? String == "uploaded" }, r.stdout)
        XCTAssertEqual(uploaded["status"] as? Int, 201)
        XCTAssertEqual(uploaded["bytes"] as? Int, local.count)
        XCTAssertEqual(uploaded["attempts"] as? Int, 2, "the 503 was retried")
        let headers = try String(contentsOfFile: server.dir + "/received/PUT_up_rec.mp4.headers", encoding: .utf8)
        XCTAssertTrue(headers.contains("Bearer t0ken"), headers)
        XCTAssertTrue(headers.contains("video/mp4"), headers)
        XCTAssertFalse(r.stdout.contains("t0ken"), "the header's secret is not in the events")
    }

    func testNoServerFailsTheRunNamingTheUploadAndKeepsAPlayableFile() throws {
        let dir = CLI.scratch()
        let url = "http://127.0.0.1:\(try LoopbackPort.free())/rec.mp4"
        CLI.write(Self.pipe(upload: "{url: \"\(url)\", method: POST, attempts: 2}"), to: dir + "/up.pipe")
        let r = try CLI.run(["run", dir + "/up.pipe", "--events", "json"], timeout: 120)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("upload of"), "names the upload: \(r.stderr)")
        XCTAssertTrue(r.stderr.contains("the file is kept"), r.stderr)
        XCTAssertEqual(r.stdout.components(separatedBy: "failed (attempt").count - 1, 2, "two attempts in the events")
        let times = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertEqual(Double(times.count), 60, accuracy: 2, "the local file is finalized and plays")
    }

    /// A stop (SIGINT) during the backoff between attempts ends the wait at once: with 5 attempts
    /// the backoff alone would be 1 + 2 + 4 + 8 s; the run ends within a second of the signal,
    /// fails naming the upload, and keeps a playable file.
    func testStopDuringTheBackoffEndsItAtOnce() throws {
        let dir = CLI.scratch()
        let url = "http://127.0.0.1:\(try LoopbackPort.free())/rec.mp4"
        CLI.write(Self.pipe(upload: "{url: \"\(url)\", method: POST, attempts: 5}"), to: dir + "/up.pipe")
        let run = try BackgroundRun(["run", dir + "/up.pipe", "--events", "json"])
        XCTAssertNotNil(run.waitFor(timeout: 60) { ($0["message"] as? String)?.contains("failed (attempt 1 of 5)") == true }, run.stderr)
        let signalled = Date()
        kill(run.process.processIdentifier, SIGINT)
        XCTAssertEqual(run.waitForExit(timeout: 10), 1, run.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(signalled), 1.0, "the backoff did not wait out its 1 s, let alone 15 s")
        XCTAssertTrue(run.stderr.contains("stopped after"), run.stderr)
        XCTAssertTrue(run.stderr.contains("the file is kept"), run.stderr)
        XCTAssertEqual(Double(try CLI.videoFrameTimes(dir + "/out.mp4").count), 60, accuracy: 2)
    }

    /// https: the server's certificate is checked, against `ca` here (self-signed for localhost);
    /// against the system's authorities the same server is refused.
    func testHttpsUploadArrivesAndTheCertificateIsChecked() throws {
        let server = try LoopbackHTTP(tls: true)
        addTeardownBlock { server.stop() }
        let dir = CLI.scratch()
        let url = server.url("/secure.mp4", tls: true)
        CLI.write(Self.pipe(upload: "{url: \"\(url)\", ca: \"\(server.dir)/cert.pem\", attempts: 1}"), to: dir + "/up.pipe")
        let r = try CLI.run(["run", dir + "/up.pipe", "--events", "json"], timeout: 120)
        XCTAssertEqual(r.status, 0, r.stderr)
        let local = try Data(contentsOf: URL(fileURLWithPath: dir + "/out.mp4"))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: server.dir + "/received/PUT_secure.mp4")), local, "byte for byte over TLS")

        let other = CLI.scratch()
        CLI.write(Self.pipe(upload: "{url: \"\(url)\", attempts: 1}"), to: other + "/up.pipe")
        let refused = try CLI.run(["run", other + "/up.pipe"], timeout: 120)
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("certificate"), refused.stderr)
        XCTAssertGreaterThan(try CLI.videoFrameTimes(other + "/out.mp4").count, 50, "the file is kept")
    }

    /// `file` as a source also reads standard input (`-`) and URLs.
    func testFileSourceReadsStandardInputAndHTTP() throws {
        let server = try LoopbackHTTP()
        addTeardownBlock { server.stop() }
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=s=320x240:r=25:d=3", "-f", "lavfi", "-i", "sine=d=3",
                           "-c:v", "libx264", "-c:a", "aac", "-f", "mpegts", server.dir + "/clip.ts"])
        for (name, path) in [("stdin", "-"), ("http", server.url("/clip.ts"))] {
            let dir = CLI.scratch()
            CLI.write("""
            pipeline: read-\(name)
            nodes:
              src:   {type: file, path: "\(path)"}
              video: {type: h264, in: src.video}
              audio: {type: aac, in: src.audio}
              out:   {type: file, in: [video, audio], path: out.mp4}
            """, to: dir + "/read.pipe")
            let p = Process()
            p.executableURL = URL(fileURLWithPath: CLI.binary)
            p.arguments = ["run", dir + "/read.pipe"]
            p.standardInput = FileHandle(forReadingAtPath: server.dir + "/clip.ts")
            p.standardError = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, name)
            XCTAssertEqual(Double(try CLI.videoFrameTimes(dir + "/out.mp4").count), 75, accuracy: 1, "\(name): 3 s at 25 fps")
        }
    }
}
