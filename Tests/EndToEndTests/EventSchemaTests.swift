import AVGraph
import AVGraphNodes
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

    /// docs/events.schema.json is what `avgraph inspect --events-schema` writes from the kinds
    /// this build knows: the runtime's own and those the built-in node types declare.
    func testTheSchemaFileIsGenerated() throws {
        let r = try CLI.run(["inspect", "--events-schema"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let file = try String(contentsOfFile: Self.schema, encoding: .utf8)
        XCTAssertEqual(r.stdout, file, "docs/events.schema.json is stale: avgraph inspect --events-schema > docs/events.schema.json")
    }

    /// The example of every kind (the runtime's own, and each one a built-in node type declares):
    /// the schema lists exactly these kinds and accepts each line as Swift encodes it (its
    /// `fields` say what `encode` writes), and Swift decodes each back to the same line.
    func testEveryKindIsInTheSchema() throws {
        let kinds = EventSchema.kinds(BuiltinNodes.registry())
        let samples = kinds.map(Self.sample)
        XCTAssertEqual(Set(samples.map(\.kind.name)).count, kinds.count, "one name per kind")
        for old in ["level", "null", "producer", "publisher", "recording", "uploaded", "passthrough", "dropped"] {
            XCTAssertTrue(samples.contains { $0.kind.name == old }, "\(old) is still an event kind")
        }
        let schema = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.schema))) as? [String: Any])
        let listed = ((schema["properties"] as? [String: Any])?["event"] as? [String: Any])?["enum"] as? [String]
        XCTAssertEqual(listed?.sorted(), samples.map(\.kind.name).sorted(), "docs/events.schema.json lists the kinds Swift knows")
        let lines = samples.map(\.jsonLine)
        let v = try Self.validate(lines.joined(separator: "\n") + "\n")
        XCTAssertEqual(v.status, 0, v.report)
        XCTAssertTrue(v.report.contains("\(lines.count) valid, 0 invalid"), v.report)
        for line in lines {
            let back = try Event.decode(line: line)
            XCTAssertEqual(back.jsonLine, line)
        }
        XCTAssertFalse(lines[1].contains(#"\/"#), lines[1])
        // A node kind's line is flat, keyed as before the kinds moved to their nodes.
        XCTAssertEqual(Event(.node(LevelEvent(mediaTime: 1, rms: [-20], peak: [-3])), node: "meter", wall: 0.5).jsonLine,
                       #"{"event":"level","media_time":1,"node":"meter","peak":[-3],"rms":[-20],"wall":0.5}"#)
    }

    /// The kind's example as a line: a node's kinds name a node, the run's own do not.
    static func sample(_ kind: any EventPayload.Type) -> Event {
        let payload = kind.example
        let wrapped = Event.Kind.coreKinds.first { $0.type == kind }?.wrap(payload) ?? (payload as? any NodeEvent).map(Event.Kind.node)
        return Event(wrapped!, node: kind.node == .absent ? nil : "node", wall: 1.5)
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
        let level = Event.Kind.node(LevelEvent(mediaTime: 0, rms: [-20], peak: [-10]))
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
