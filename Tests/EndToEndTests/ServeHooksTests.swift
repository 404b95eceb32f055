import AVGraphTesting
import Foundation
import XCTest

/// `avgraph serve --hooks`: every session's `publish`, `unpublish` and `recording` reach the
/// backend in the order they happened, each signed (checked by Python's hmac in ServeBackend),
/// and a backend down for 20 s in the middle loses none: they wait on disk.
final class ServeHooksTests: XCTestCase {
    func testHooksArriveSignedInOrderAcrossTwentySecondsOfReceiverDown() throws {
        let dir = CLI.scratch("serve-hooks")
        _ = ServeTests.clip
        let backend = try ServeBackend()
        defer { backend.stop() }
        let (runtime, environment) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let rtmp = try LoopbackPort.free(), srt = try LoopbackPort.free()
        let queue = dir + "/rec/hooks"
        let serve = try ServeTests.startServe([ServeTests.template(dir, idle: "1s"), "--listen", "rtmp://127.0.0.1:\(rtmp)",
                                                 "--listen", "srt://127.0.0.1:\(srt)", "--open"] + backend.hookArguments(queue: queue),
                                                dir: dir, environment: environment, in: self)
        defer { if serve.process.isRunning { kill(serve.process.processIdentifier, SIGKILL) } }
        let publishers = [try ServeTests.publish("rtmp://127.0.0.1:\(rtmp)/live/hook1", seconds: 5),
                          try ServeTests.publish("srt://127.0.0.1:\(srt)?streamid=hook2", seconds: 5)]
        defer { for p in publishers where p.isRunning { p.terminate() } }
        let published = Date().addingTimeInterval(10)
        while Date() < published && backend.hooks.count < 2 { usleep(50_000) }
        XCTAssertEqual(backend.hooks.map { $0["body"] as? [String: Any] }.compactMap { $0?["event"] as? String }, ["publish", "publish"])

        // Down while the publishers leave and their runs finalize: unpublish and recording wait on disk.
        backend.stop()
        let down = Date()
        for p in publishers { p.waitUntilExit() }
        Thread.sleep(forTimeInterval: max(0, 20 - Date().timeIntervalSince(down)))
        let waiting = ((try? FileManager.default.contentsOfDirectory(atPath: queue)) ?? []).filter { $0.hasSuffix(".json") }
        XCTAssertEqual(waiting.count, 4, "unpublish and recording of both sessions queued on disk: \(waiting)\n\(serve.stderr)")
        try backend.start()
        let end = Date().addingTimeInterval(15)
        while Date() < end && backend.hooks.count < 6 { usleep(100_000) }

        let hooks = backend.hooks
        XCTAssertEqual(hooks.count, 6, "\(hooks)")
        XCTAssertTrue(hooks.allSatisfy { $0["valid"] as? Bool == true }, "every signature valid: \(hooks)")
        XCTAssertEqual(Set(hooks.compactMap { $0["delivery"] as? String }).count, 6, "a delivery id each")
        let bodies = hooks.compactMap { $0["body"] as? [String: Any] }
        let sessions = Set(bodies.compactMap { $0["session"] as? String })
        XCTAssertEqual(sessions.count, 2)
        for session in sessions {
            let mine = bodies.filter { $0["session"] as? String == session }
            XCTAssertEqual(mine.compactMap { $0["event"] as? String }, ["publish", "unpublish", "recording"], "in order: \(mine)")
            let first = mine[0]
            let key = first["key"] as? String ?? ""
            XCTAssertEqual(first["protocol"] as? String, key == "hook1" ? "rtmp" : "srt")
            XCTAssertNotNil((first["time"] as? String).flatMap { ISO8601DateFormatter.withFractions.date(from: $0) }, "time: \(first)")
            let recording = mine[2]
            let path = try XCTUnwrap(recording["path"] as? String)
            XCTAssertTrue(path.hasSuffix("/rec/\(key)-\(session).mp4"), path)
            XCTAssertEqual(recording["finalized"] as? Bool, true)
            let m = try ServeTests.measure(path)
            XCTAssertEqual(recording["frames"] as? Int, m.frames, "the hook's frames are the file's: \(recording)")
            XCTAssertEqual(recording["seconds"] as? Double ?? 0, m.video, accuracy: 0.1)
            XCTAssertEqual(m.video, 5, accuracy: 0.3, "\(key): seconds recorded")
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            XCTAssertEqual(recording["bytes"] as? Int ?? 0, size, accuracy: size / 10 + 1, "bytes: \(recording)")
        }
        // docs/hooks.schema.json, by Python's jsonschema: every body fits, and a body that is not a hook does not.
        let problems = try PythonWitness.run("""
            import json, sys, jsonschema
            v = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
            bad = [e.message for line in open(sys.argv[2]) for e in v.iter_errors(json.loads(line)['body'])]
            if not list(v.iter_errors({'event': 'recording', 'session': 's1', 'key': 'k', 'app': '', 'protocol': 'srt', 'peer': 'p', 'time': 't'})):
                bad.append('a recording without its fields passed')
            print(json.dumps(bad))
            """, [CLI.packageRoot + "/docs/hooks.schema.json", backend.dir + "/hooks.jsonl"])
        XCTAssertEqual(problems as? [String], [])
        kill(serve.process.processIdentifier, SIGTERM)
        XCTAssertEqual(serve.waitForExit(timeout: 20), 0, serve.stderr)
        XCTAssertEqual(((try? FileManager.default.contentsOfDirectory(atPath: queue)) ?? []).filter { $0.hasSuffix(".json") }, [], "the queue is empty")
    }

    /// Hooks are queued per session: a receiver that answers 500 to one session's events (the
    /// backend fails keys beginning with `fail`) holds back that session only; another session's
    /// publish, unpublish and recording arrive within seconds of happening.
    func testOneSessionsFailingHookHoldsBackOnlyThatSession() throws {
        let dir = CLI.scratch("serve-hooks-lanes")
        _ = ServeTests.clip
        let backend = try ServeBackend()
        defer { backend.stop() }
        let (runtime, environment) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let rtmp = try LoopbackPort.free()
        let queue = dir + "/rec/hooks"
        let serve = try ServeTests.startServe([ServeTests.template(dir, idle: "1s"), "--listen", "rtmp://127.0.0.1:\(rtmp)", "--open"]
                                                + backend.hookArguments(queue: queue),
                                                dir: dir, environment: environment, in: self)
        // The failing session first, so its publish heads the queue when the other's arrive.
        let failing = try ServeTests.publish("rtmp://127.0.0.1:\(rtmp)/live/fail1", seconds: 3)
        defer { if failing.isRunning { failing.terminate() } }
        XCTAssertTrue(ServeTests.waitFor(timeout: 10) { !backend.failedHooks.isEmpty }, "the failing session's publish was tried: \(serve.stderr)")
        let good = try ServeTests.publish("rtmp://127.0.0.1:\(rtmp)/live/good1", seconds: 3)
        defer { if good.isRunning { good.terminate() } }
        let goodEvents = { backend.hooks.compactMap { $0["body"] as? [String: Any] }.filter { $0["key"] as? String == "good1" } }
        XCTAssertTrue(ServeTests.waitFor(timeout: 5) { !goodEvents().isEmpty }, "publish within seconds: \(serve.stderr)")
        good.waitUntilExit()
        let left = Date()
        // The run waits its 1 s idle, then finalizes: unpublish at once, recording when the file is closed.
        XCTAssertTrue(ServeTests.waitFor(timeout: 8) { goodEvents().count == 3 }, "\(goodEvents())\n\(serve.stderr)")
        print("serve hooks: good1's three events delivered \(String(format: "%.2f", Date().timeIntervalSince(left))) s after its publisher left")
        XCTAssertEqual(goodEvents().compactMap { $0["event"] as? String }, ["publish", "unpublish", "recording"])
        let failed = backend.failedHooks
        XCTAssertFalse(backend.hooks.contains { ($0["body"] as? [String: Any])?["key"] as? String == "fail1" }, "fail1's events are not delivered")
        XCTAssertEqual(Set(failed.compactMap { $0["event"] as? String }), ["publish"], "fail1's later events wait behind its first: \(failed)")
        XCTAssertGreaterThan(failed.count, 1, "its first is retried")
        failing.waitUntilExit()
        kill(serve.process.processIdentifier, SIGTERM)
        XCTAssertEqual(serve.waitForExit(timeout: 30), 0, serve.stderr)
        let waiting = ((try? FileManager.default.contentsOfDirectory(atPath: queue)) ?? []).filter { $0.hasSuffix(".json") }
        XCTAssertEqual(waiting.count, 3, "fail1's publish, unpublish and recording stay queued for the next serve: \(waiting)")
    }
}

extension ISO8601DateFormatter {
    static var withFractions: ISO8601DateFormatter {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f
    }
}
