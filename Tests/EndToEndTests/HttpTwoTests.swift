import AVGraphHTTP
import AVGraphTesting
import Foundation
import XCTest

/// The page's server over HTTP/2 (TLS with ALPN h2, what Apple's players need for LL-HLS), many
/// requests held at once, the connection limit as a flag, and `.chunked` answers: real curl
/// (libcurl's nghttp2), real sockets.
final class HttpTwoTests: XCTestCase {
    /// A self-signed certificate for 127.0.0.1 and localhost.
    private func certificate(_ dir: String) throws -> (cert: String, key: String) {
        let (cert, key) = (dir + "/cert.pem", dir + "/key.pem")
        _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                           "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        return (cert, key)
    }

    /// curl's `-w` output for `url` fetched into `into`.
    private func fetch(_ url: String, into path: String, _ extra: [String]) throws -> String {
        try CLI.shell(["curl", "-k", "-sS", "--max-time", "10", "-o", path, "-w", "%{http_version} %{http_code}"] + extra + [url])
    }

    private func bytes(_ path: String) -> Data { FileManager.default.contents(atPath: path) ?? Data() }

    func testTLSOffersHTTP2AndStillHTTP1AndTheRulesHold() throws {
        let dir = CLI.scratch()
        let (cert, key) = try certificate(dir)
        let (run, port) = try HttpDoorTests.startRun(dir, seconds: 8, ["--http-tls", "\(cert),\(key)"])
        defer { if run.process.isRunning { run.process.terminate() } }
        let base = "https://127.0.0.1:\(port)"
        XCTAssertEqual(try fetch(base + "/", into: dir + "/h2.html", ["--http2"]), "2 200")
        XCTAssertEqual(try fetch(base + "/", into: dir + "/h1.html", ["--http1.1"]), "1.1 200")
        XCTAssertGreaterThan(bytes(dir + "/h2.html").count, 5000, "the page itself")
        XCTAssertEqual(bytes(dir + "/h2.html"), bytes(dir + "/h1.html"), "the page's bytes over HTTP/2 and HTTP/1.1")
        XCTAssertEqual(try fetch(base + "/api/stats", into: dir + "/stats.json", ["--http2"]), "2 200")
        XCTAssertNotNil(try? JSONSerialization.jsonObject(with: bytes(dir + "/stats.json")))
        // HTTP/2's :authority is the Host the rules read; another name is refused as over HTTP/1.1.
        XCTAssertEqual(try fetch(base + "/", into: "/dev/null", ["--http2", "-H", "Host: attacker.example:\(port)"]), "2 421")
        XCTAssertEqual(try fetch(base + "/api/ctl", into: "/dev/null", ["--http2", "-X", "POST", "-H", "Origin: https://stranger.test",
                                                                        "-H", "Content-Type: application/json", "--data", "{}"]), "2 403")
        _ = FileManager.default.createFile(atPath: dir + "/big", contents: Data(repeating: 0x20, count: 100_000))
        XCTAssertEqual(try fetch(base + "/api/ctl", into: "/dev/null", ["--http2", "-X", "POST", "--data-binary", "@" + dir + "/big"]), "2 413")
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
    }

    func testPlainHTTPStaysHTTP1() throws {
        let dir = CLI.scratch()
        let (run, port) = try HttpDoorTests.startRun(dir, seconds: 4)
        defer { if run.process.isRunning { run.process.terminate() } }
        // curl asks for an upgrade to h2c; the server answers in HTTP/1.1.
        XCTAssertEqual(try fetch("http://127.0.0.1:\(port)/api/stats", into: "/dev/null", ["--http2"]), "1.1 200")
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
    }

    /// 300 requests at once over HTTP/2: libcurl opens at most 100 streams on a connection, so
    /// three curls of 100 requests each, one connection each (a curl's first transfer connects).
    /// Each request's `-w` line: version, status, connections it made.
    private func threeHundredStreams(_ url: String, into dir: String) throws -> [Substring] {
        let curl = (0..<3).map { k in
            "curl -k -sS --http2 --parallel --parallel-max 100 --max-time 30 -o '\(dir)/r\(k)_#1' " +
                "-w '%{http_version} %{http_code} %{num_connects}\\n' '\(url)?n=[1-100]' &"
        }
        let lines = try CLI.shell(["sh", "-c", curl.joined(separator: " ") + " wait"]).split(separator: "\n")
        print("300 HTTP/2 requests to \(url): \(Dictionary(lines.map { ($0, 1) }, uniquingKeysWith: +))")
        XCTAssertEqual(lines.count, 300)
        XCTAssertEqual(lines.compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +), 3, "a connection a curl")
        return lines
    }

    func testThreeHundredConcurrentStreamsAreAllAnswered() throws {
        let dir = CLI.scratch()
        let (cert, key) = try certificate(dir)
        let (run, port) = try HttpDoorTests.startRun(dir, seconds: 10, ["--http-tls", "\(cert),\(key)"])
        defer { if run.process.isRunning { run.process.terminate() } }
        let lines = try threeHundredStreams("https://127.0.0.1:\(port)/api/graph", into: dir)
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("2 200 ") })
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
    }

    func testTheConnectionLimitIsAFlag() throws {
        let dir = CLI.scratch()
        for bad in ["3", "100000", "many"] {
            let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http", "127.0.0.1:0", "--http-connections", bad])
            XCTAssertNotEqual(r.status, 0)
            XCTAssertTrue(r.stderr.contains("--http-connections"), r.stderr)
        }
        let usage = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http-connections", "8"])
        XCTAssertTrue(usage.stderr.contains("--http-connections goes with --http"), usage.stderr)

        let (run, port) = try HttpDoorTests.startRun(dir, seconds: 20, ["--http-connections", "5"])
        defer { if run.process.isRunning { run.process.terminate() } }
        let seen = try XCTUnwrap(PythonWitness.run(Self.busy, [String(port)]) as? [String: Any])
        print("five busy connections and a sixth: \(seen)")
        XCTAssertEqual(seen["refused"] as? String, "HTTP/1.1 503 Service Unavailable")
        XCTAssertEqual(seen["beside_idle"] as? String, "HTTP/1.1 200 OK", "an idle one makes room")
        XCTAssertEqual(seen["after"] as? String, "HTTP/1.1 200 OK")
        XCTAssertEqual(try CLI.run(["ctl", dir + "/ctl.sock", "stop"]).status, 0)
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)

        // More than the hard open-file limit allows is said with both numbers, and the run goes on.
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_max < 60000 {
            let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http", "127.0.0.1:0", "--http-connections", "60000",
                                 "--duration", "1s", "--set", "out.path=\(dir)/short.mp4"])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stderr.contains("60256") && r.stderr.contains("\(limit.rlim_max)"), r.stderr)
        }
    }

    /// Five connections whose request bodies never finish (busy), then a sixth: refused. Then four
    /// busy and one idle: the idle one is closed for the newcomer. Then all closed: served.
    static let busy = #"""
import json, socket, sys, time
port = int(sys.argv[1])
def first_line(s):
    s.settimeout(5)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
    except OSError: pass
    return data.split(b"\r\n")[0].decode()
def busy():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /api/ctl HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
    return s
def get():
    s = socket.create_connection(("127.0.0.1", port))
    try: s.sendall(b"GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    except OSError: pass
    return first_line(s)
out = {}
held = [busy() for _ in range(5)]
time.sleep(0.5)
out["refused"] = get()
for s in held: s.close()
time.sleep(0.5)
held = [busy() for _ in range(4)]
idle = socket.create_connection(("127.0.0.1", port))
time.sleep(0.5)
out["beside_idle"] = get()
for s in held + [idle]: s.close()
time.sleep(0.5)
out["after"] = get()
print(json.dumps(out))
"""#

    // MARK: The server in this process: routes of the test's own.

    /// A server on a free loopback port answering `routes`, over TLS when `tls` (h2 and http/1.1).
    private func server(_ dir: String, tls: Bool, connections: Int = 64, _ routes: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws -> HTTPServer {
        let address = try XCTUnwrap(HTTPAddress("127.0.0.1:0"))
        let context = try tls ? certificate(dir) : nil
        var limits = HTTPService.Limits()
        limits.connections = connections
        let service = HTTPService(names: HTTPNames(bound: address), tls: try context.map { try HTTPTLS.context(certificate: $0.cert, key: $0.key) },
                                  limits: limits, routes: routes)
        return try HTTPServer(address, name: "test", service: service)
    }

    /// Three pieces 100 ms apart, then the end.
    static func threePieces(_ writer: HTTPBodyWriter) {
        for (n, piece) in ["one ", "two ", "three"].enumerated() {
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100 * n)) {
                writer.write(Array(piece.utf8))
                if n == 2 { writer.end() }
            }
        }
    }

    func testChunkedAnswersOverHTTP1AndHTTP2() throws {
        let dir = CLI.scratch()
        let closed = Counter()
        let server = try server(dir, tls: true) { request in
            switch request.path {
            case "/part":
                return .chunked(status: 200, contentType: "video/mp4", headers: ["Cache-Control": "no-store"]) { writer in
                    writer.onClose { closed.add() }
                    Self.threePieces(writer)
                }
            case "/later-part":
                return .later { respond in
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) {
                        respond(.chunked(status: 200, contentType: "video/mp4") { Self.threePieces($0) })
                    }
                }
            default:
                return .text(404, "no\n")
            }
        }
        defer { server.close() }
        let base = "https://127.0.0.1:\(server.address.port)"
        for path in ["/part", "/later-part"] {
            XCTAssertEqual(try fetch(base + path, into: dir + "/h1", ["--http1.1", "-D", dir + "/h1.head"]), "1.1 200")
            XCTAssertEqual(try fetch(base + path, into: dir + "/h2", ["--http2"]), "2 200")
            XCTAssertEqual(String(decoding: bytes(dir + "/h1"), as: UTF8.self), "one two three", path)
            XCTAssertEqual(bytes(dir + "/h1"), bytes(dir + "/h2"), path)
            XCTAssertTrue(String(decoding: bytes(dir + "/h1.head"), as: UTF8.self).lowercased().contains("transfer-encoding: chunked"))
        }
        // The connection goes on after a chunked answer: the second request reuses it.
        let twice = try CLI.shell(["curl", "-k", "-sS", "--http1.1", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects}\\n",
                                   base + "/part", base + "/part"])
        XCTAssertEqual(twice, "1\n0\n")
        // HEAD: the head alone, the writer already ended.
        let head = try CLI.shell(["curl", "-k", "-sS", "--http1.1", "-I", "--max-time", "5", base + "/part"])
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 200"), head)
        usleep(300_000)
        XCTAssertEqual(closed.value, 5, "onClose once for each answer, the HEAD's included")
    }

    /// A client that asks for a body and does not read it: the writer's queue passes 4 MB while
    /// the socket takes nothing, and the server closes the connection (the client then reads to
    /// its end, far short of what the route would write).
    func testAClientThatDoesNotReadIsClosed() throws {
        let dir = CLI.scratch()
        let closed = Counter()
        let server = try server(dir, tls: false) { _ in
            .chunked(status: 200, contentType: "application/octet-stream") { writer in
                writer.onClose { closed.add() }
                DispatchQueue.global().async {
                    let piece = [UInt8](repeating: 0x61, count: 64 * 1024), end = Date() + 15
                    while writer.isOpen && Date() < end {
                        writer.write(piece)
                        usleep(1000)
                    }
                }
            }
        }
        defer { server.close() }
        let seen = try XCTUnwrap(PythonWitness.run(Self.notReading, [String(server.address.port)]) as? [String: Any])
        print("a client that does not read: \(seen)")
        XCTAssertEqual(seen["eof"] as? Bool, true, "the server closed it")
        XCTAssertLessThan(seen["received"] as? Int ?? .max, 64 * 1024 * 1024)
        XCTAssertEqual(closed.value, 1)
    }

    static let notReading = #"""
import json, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /firehose HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
time.sleep(4)
s.settimeout(5)
received, eof = 0, False
try:
    while True:
        data = s.recv(1 << 20)
        if not data:
            eof = True
            break
        received += len(data)
except OSError: pass
print(json.dumps({"received": received, "eof": eof}))
"""#

    /// `count` requests held by a `.later` route until all of them are in, then answered at once:
    /// each held a place (HTTP/1.1: a connection; HTTP/2: a stream) at the same time.
    private final class Gate: @unchecked Sendable {
        private let lock = NSLock()
        private var waiting: [@Sendable (HTTPResponse) -> Void] = []
        let count: Int
        init(count: Int) { self.count = count }

        func hold(_ respond: @escaping @Sendable (HTTPResponse) -> Void) {
            lock.lock()
            waiting.append(respond)
            let all = waiting.count >= count ? waiting : []
            if !all.isEmpty { waiting = [] }
            lock.unlock()
            for r in all { r(.text(200, "released \(count)\n")) }
        }
    }

    /// 300 streams (three connections) held until the last is in.
    func testThreeHundredHeldHTTP2StreamsAreAnsweredTogether() throws {
        let dir = CLI.scratch()
        let gate = Gate(count: 300)
        let server = try server(dir, tls: true) { _ in .later { gate.hold($0) } }
        defer { server.close() }
        let lines = try threeHundredStreams("https://127.0.0.1:\(server.address.port)/held", into: dir)
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("2 200 ") })
        XCTAssertEqual(String(decoding: bytes(dir + "/r2_100"), as: UTF8.self), "released 300\n")
    }

    /// 2000 HTTP/1.1 connections each waiting for its answer (a blocked playlist reload's shape).
    func testTwoThousandHeldConnectionsAreAnsweredTogether() throws {
        let dir = CLI.scratch()
        XCTAssertNil(DescriptorLimit.raise(toFit: 2100 + DescriptorLimit.reserve))
        let gate = Gate(count: 2000)
        let server = try server(dir, tls: false, connections: 2100) { _ in .later { gate.hold($0) } }
        defer { server.close() }
        let seen = try XCTUnwrap(PythonWitness.run(Self.held, [String(server.address.port), "2000"]) as? [String: Any])
        print("2000 held connections: \(seen)")
        XCTAssertEqual(seen["answered"] as? Int, 2000)
    }

    static let held = #"""
import json, resource, selectors, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
sel = selectors.DefaultSelector()
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /playlist.m3u8?_HLS_msn=9 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, b"")
answered, end = 0, time.time() + 30
while answered < n and time.time() < end:
    for key, _ in sel.select(timeout=1):
        data = key.fileobj.recv(4096)
        got = key.data + data
        if b"released" in got or not data:
            answered += b"200 OK" in got
            sel.unregister(key.fileobj)
            key.fileobj.close()
        else:
            sel.modify(key.fileobj, selectors.EVENT_READ, got)
print(json.dumps({"answered": answered}))
"""#
}

private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
