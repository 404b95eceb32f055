import AVGraph
import Foundation
import XCTest

/// Every event line avgraph prints validates against docs/events.schema.json, checked by an
/// independent validator (python's jsonschema, Draft 2020-12), and the schema refuses what is not an event.
final class EventSchemaTests: XCTestCase {
    static let schema = CLI.packageRoot + "/docs/events.schema.json"

    /// Runs scripts/validate-events over `lines`; returns its exit status and report.
    static func validate(_ lines: String) throws -> (status: Int32, report: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", CLI.packageRoot + "/scripts/validate-events", schema]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = output
        try p.run()
        input.fileHandleForWriting.write(Data(lines.utf8))
        try input.fileHandleForWriting.close()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, report)
    }

    func testEveryLineOfALiveRunValidates() throws {
        let dir = CLI.scratch()
        let r = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--duration", "3s", "--events", "json",
                             "--set", "out.path=\(dir)/live.mp4"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = r.stdout.split(separator: "\n")
        XCTAssertGreaterThanOrEqual(lines.count, 4, r.stdout)
        XCTAssertTrue(lines.first?.contains(#""event":"start""#) ?? false)
        XCTAssertTrue(lines.last?.contains(#""event":"eos""#) ?? false)
        XCTAssertFalse(r.stdout.contains(#"\/"#), "paths must not escape '/'")
        let v = try Self.validate(r.stdout)
        XCTAssertEqual(v.status, 0, v.report)
        XCTAssertTrue(v.report.contains("\(lines.count) valid, 0 invalid"), v.report)
        // The Swift side reads back what it wrote.
        for line in lines { XCTAssertNoThrow(try Event.decode(line: String(line)), String(line)) }
        // The run's own check on what it says: 3 s of 30 fps video went to the file.
        let eos = try Event.decode(line: String(lines.last!))
        guard case .eos(let end) = eos.kind else { return XCTFail("last event is not eos") }
        XCTAssertEqual(end.sinks.first?.frames, 90)
        // Where the CPU went: every node's thread, all of them together no more than the process
        // (which also counts the threads nodes start themselves, such as x264's).
        let cpu = try XCTUnwrap(end.cpu)
        let names = try CLI.run(["check", CLI.packageRoot + "/pipelines/live.pipe", "--format", "json"]).stdout
        for node in cpu.nodes { XCTAssertTrue(names.contains("\"\(node.node)\""), node.node) }
        XCTAssertGreaterThan(cpu.nodes.count, 5)
        let nodeSum = cpu.nodes.map(\.seconds).reduce(0, +)
        XCTAssertGreaterThan(nodeSum, 0)
        XCTAssertLessThanOrEqual(nodeSum, cpu.process + 0.01)
        XCTAssertGreaterThan(cpu.process, 0.3, "3 s of 720p H.264 cost more than that")
        let probe = try CLI.probe(dir + "/live.mp4")
        XCTAssertEqual(Double(CLI.stream(probe, "video")?["nb_frames"] as? String ?? ""), 90)
    }

    /// A realtime run with more kinds of events: a socket source waiting (listening, warning),
    /// a meter (level), a null sink (null), stop by duration (stopping, eos).
    func testEveryLineOfARunWithNodeEventsValidates() throws {
        let dir = CLI.scratch()
        CLI.write("""
        pipeline: events-\(UUID().uuidString.prefix(6))
        duration: 1.5s
        nodes:
          phone: {type: socket, path: \(dir)/in.sock, size: 320x240, idle-warning: 300ms}
          tone:  {type: tone, freq: 440}
          meter: {type: meter, in: tone}
          sink:  {type: null, in: [meter, phone.video]}
        """, to: dir + "/events.pipe")
        let r = try CLI.run(["run", dir + "/events.pipe", "--realtime", "--events", "json"], timeout: 60)
        XCTAssertEqual(r.status, 0, r.stderr)
        let names = Set(r.stdout.split(separator: "\n").compactMap { try? Event.decode(line: String($0)).kind.name })
        for expected in ["start", "listening", "warning", "level", "null", "eos"] {
            XCTAssertTrue(names.contains(expected), "no \(expected) event in \(names.sorted())")
        }
        let v = try Self.validate(r.stdout)
        XCTAssertEqual(v.status, 0, v.report)
    }

    func testTheSchemaRejectsAnUnknownEventAndUnknownFields() throws {
        for bad in [#"{"event":"exploded","wall":1.0}"#,
                    #"{"event":"warning","wall":1.0,"node":"a","message":"m","severity":3}"#,
                    #"{"event":"level","wall":1.0,"node":"meter","media_time":1.0,"rms":[-20]}"#,
                    #"{"wall":1.0,"message":"no event field"}"#] {
            let v = try Self.validate(bad + "\n")
            XCTAssertEqual(v.status, 1, "accepted: \(bad)")
            XCTAssertTrue(v.report.contains("0 valid, 1 invalid"), v.report)
        }
        XCTAssertThrowsError(try Event.decode(line: #"{"event":"exploded","wall":1.0}"#))
    }

    /// One sample of every kind the Swift type knows: the schema lists exactly these kinds and
    /// accepts each as Swift encodes it, and Swift decodes each back.
    func testEverySwiftKindIsInTheSchema() throws {
        let samples: [Event] = [
            Event(.start(.init(pipeline: "p", realtime: true, nodes: 3, duration: nil))),
            Event(.control(.init(socket: "/tmp/a/p.sock"))),
            Event(.stats(.init(nodes: [.init(node: "a", queue: [1], dropped: 2, droppedByKind: .init(video: 2, audio: 0),
                                             emitted: [3], bytes: [4], time: [0.5])],
                               mediaTime: 0.5, dropped: 2, droppedByKind: .init(video: 2, audio: 0), rss: 1, queuedBytes: 0))),
            Event(.paused(.init(mediaTime: 1))),
            Event(.resumed(.init(pausedFor: 2, mediaTime: 1))),
            Event(.stopping(.init(reason: "SIGINT"))),
            Event(.warning(.init("w")), node: "phone"),
            Event(.error(.init("e"))),
            Event(.eos(.init(mediaTime: 3, peakRSS: 5, reason: "end", sinks: [.init(node: "out", bytes: 9, mediaDuration: 3, frames: 90)]))),
            Event(.applied(.init(option: "gain", value: .object(["mic": .number(2)]), mediaTime: 1)), node: "mix"),
            Event(.level(.init(mediaTime: 1, rms: [-20], peak: [-3])), node: "meter"),
            Event(.latency(.init(count: 1, p50: 2, p99: 3, max: 4)), node: "video"),
            Event(.passthrough(.init(passed: 850, encoded: 50, spans: 3, maxOverstay: 1.8)), node: "video"),
            Event(.listening(.init(path: "/tmp/x.sock")), node: "phone"),
            Event(.producer(.init(state: .disconnected, session: 1, messages: 4, message: "gone")), node: "phone"),
            Event(.dropped(.init(video: 1, audio: 0)), node: "live"),
            Event(.reconnecting(.init(url: "rtmp://h/a", attempt: 1, of: 5, delay: 0.5)), node: "live"),
            Event(.reconnected(.init(url: "rtmp://h/a", attempts: 2, after: 1.5)), node: "live"),
            Event(.bitrate(.init(from: 4_000_000, to: 1_200_000, reason: "live: 0.40 s queued")), node: "video"),
            Event(.disconnected(.init(url: "rtmp://h/a", reason: "EOF")), node: "live"),
            Event(.null(.init(inputs: ["a"], counts: [1], bytes: [2])), node: "sink"),
            Event(.publisher(.init(state: .disconnected, session: 1, peer: "127.0.0.1:5000", url: "rtmp://h/live/***",
                                   reason: "ended", seconds: 8, packets: 600)), node: "src"),
            Event(.idle(.init(seconds: 3, url: "rtmp://h/live/***")), node: "src"),
            Event(.uploaded(.init(path: "/tmp/a.mp4", url: "https://h/a.mp4", status: 201, bytes: 10, attempts: 1, seconds: 0.5)), node: "out"),
            Event(.recording(.init(path: "/tmp/a-002.mp4", part: 2, seconds: 10.0, bytes: 1000, frames: 300, finalized: true)), node: "out"),
            Event(.custom(.init("ducking", mediaTime: 1, ["on": .bool(true)])), node: "duck"),
        ]
        XCTAssertEqual(samples.map(\.kind.name).sorted(), Event.Kind.names, "a sample for every kind")
        let schema = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.schema))) as? [String: Any])
        let listed = ((schema["properties"] as? [String: Any])?["event"] as? [String: Any])?["enum"] as? [String]
        XCTAssertEqual(listed?.sorted(), Event.Kind.names, "docs/events.schema.json lists the kinds Swift knows")
        let lines = samples.map(\.jsonLine)
        let v = try Self.validate(lines.joined(separator: "\n") + "\n")
        XCTAssertEqual(v.status, 0, v.report)
        for line in lines {
            let back = try Event.decode(line: line)
            XCTAssertEqual(back.jsonLine, line)
        }
        XCTAssertFalse(lines[1].contains(#"\/"#), lines[1])
    }

    /// Listeners run off the emitting thread, in order, and may emit themselves without deadlock.
    func testListenersRunOffTheEmittingThreadInOrder() async throws {
        let log = EventLog(output: .none)
        let seen = CLI.DataBox(), threads = CLI.DataBox()
        log.onEvent { event in
            threads.append(Data("\(Self.threadID()) ".utf8))
            if case .warning(let w) = event.kind { seen.append(Data((w.message + ",").utf8)) }
            if case .stopping = event.kind { log.emit(.warning(.init("from a listener"))) }
        }
        let stream = log.stream()
        let emitter = Self.emitHundred(log)
        var received = 0
        for await e in stream {
            received += 1
            if e.message == "from a listener" { break }
        }
        log.flush()
        XCTAssertEqual(received, 102)
        XCTAssertEqual(seen.string, (0..<100).map { "\($0)," }.joined() + "from a listener,")
        XCTAssertFalse(threads.string.split(separator: " ").contains { UInt(String($0)) == emitter }, "a listener ran on the emitting thread")
    }

    /// A consumer that stops reading holds back at most `pendingLimit` events: past that the debug
    /// kinds are dropped and counted, warnings still all arrive, in order.
    func testAStuckConsumerBoundsWhatIsHeldAndDropsOnlyDebugEvents() {
        let log = EventLog(output: .none)
        let gate = DispatchSemaphore(value: 0)
        let warnings = CLI.DataBox()
        log.onEvent { event in
            if case .start = event.kind { gate.wait() }
            if case .warning(let w) = event.kind { warnings.append(Data((w.message + ",").utf8)) }
        }
        log.emit(.start(.init(pipeline: "p", realtime: true, nodes: 1, duration: nil)))
        let level = Event.Kind.level(.init(mediaTime: 0, rms: [-20], peak: [-10]))
        for i in 0..<(EventLog.pendingLimit + 5000) {
            log.emit(level, node: "meter")
            if i % 5000 == 0 { log.emit(.warning(.init("w\(i)"))) }
        }
        XCTAssertGreaterThanOrEqual(log.droppedForBackpressure, 5000 - 5)
        gate.signal()
        log.flush()
        XCTAssertEqual(warnings.string, "w0,w5000,w10000,")
    }

    static func threadID() -> UInt { UInt(pthread_self()) }

    /// Emits 100 warnings and a stop from this thread; returns its id.
    static func emitHundred(_ log: EventLog) -> UInt {
        for i in 0..<100 { log.emit(.warning(.init("\(i)"))) }
        log.emit(.stopping(.init(reason: "test")))
        return threadID()
    }
}
