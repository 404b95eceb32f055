import AVGraphTesting
import Foundation
import XCTest

/// The backend `avgraph serve` talks to in the tests: a real HTTP server on loopback (Python's
/// http.server, its own process so a test can take it down and bring it back on the same port).
/// `POST /auth` admits a key unless it begins with `denied` (403) or `slow` (answers after 3 s);
/// a key in `sets` gets `{"set": ...}` back. `POST /hooks` answers 500 to the hooks of a key that
/// begins with `fail` (noting each attempt in `failed.jsonl`); it appends the others to `hooks.jsonl`:
/// the body, the delivery id, and whether the signature is the HMAC-SHA256 of the body with the
/// secret (checked by Python's hmac, an independent witness).
final class ServeBackend: @unchecked Sendable {
    let dir: String
    let port: Int
    let secret = "s3cret-for-the-hooks-\(UUID().uuidString.prefix(8))"
    private var process: Process?

    init(sets: [String: [String: String]] = [:]) throws {
        dir = CLI.scratch("backend")
        port = try LoopbackPort.free()
        CLI.write(secret + "\n", to: dir + "/secret")
        let setsJSON = String(decoding: try JSONSerialization.data(withJSONObject: sets), as: UTF8.self)
        CLI.write("""
        import http.server, sys, json, hmac, hashlib, time
        port, root = int(sys.argv[1]), sys.argv[2]
        secret = open(root + '/secret').read().strip().encode()
        sets = json.loads(open(root + '/sets.json').read())
        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(s):
                body = s.rfile.read(int(s.headers['Content-Length']))
                if s.path == '/auth':
                    q = json.loads(body)
                    with open(root + '/auth.jsonl', 'a') as f: f.write(json.dumps(q) + '\\n')
                    if q['key'].startswith('denied'):
                        s.send_response(403); s.end_headers(); return
                    if q['key'].startswith('slow'): time.sleep(3)
                    answer = json.dumps({'set': sets[q['key']]} if q['key'] in sets else {}).encode()
                    s.send_response(200); s.send_header('Content-Length', str(len(answer))); s.end_headers(); s.wfile.write(answer)
                    return
                if json.loads(body).get('key', '').startswith('fail'):
                    with open(root + '/failed.jsonl', 'a') as f: f.write(body.decode() + '\\n')
                    s.send_response(500); s.end_headers(); return
                want = 'sha256=' + hmac.new(secret, body, hashlib.sha256).hexdigest()
                got = s.headers.get('X-Avgraph-Signature', '')
                with open(root + '/hooks.jsonl', 'a') as f:
                    f.write(json.dumps({'body': json.loads(body), 'valid': hmac.compare_digest(want, got),
                                        'delivery': s.headers.get('X-Avgraph-Delivery')}) + '\\n')
                s.send_response(204); s.end_headers()
            def log_message(s, *a): pass
        http.server.ThreadingHTTPServer.allow_reuse_address = True
        http.server.ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()
        """, to: dir + "/backend.py")
        CLI.write(setsJSON, to: dir + "/sets.json")
        try start()
    }

    deinit { stop() }

    func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", dir + "/backend.py", String(port), dir]
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let end = Date().addingTimeInterval(10)
        while Date() < end && !LoopbackPort.accepts(port) { usleep(50_000) }
    }

    func stop() {
        guard let p = process else { return }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// `serve`'s flags that send its hooks here, signed with this backend's secret.
    func hookArguments(queue: String? = nil) -> [String] {
        ["--hooks", url("/hooks"), "--hooks-secret", dir + "/secret"] + (queue.map { ["--hooks-queue", $0] } ?? [])
    }

    /// The hooks received so far, in the order they came.
    var hooks: [[String: Any]] {
        let text = (try? String(contentsOfFile: dir + "/hooks.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The hooks answered 500, each attempt.
    var failedHooks: [[String: Any]] {
        let text = (try? String(contentsOfFile: dir + "/failed.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    var authQuestions: [[String: Any]] {
        let text = (try? String(contentsOfFile: dir + "/auth.jsonl", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}
