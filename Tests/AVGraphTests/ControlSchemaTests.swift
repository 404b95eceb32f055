import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// The control protocol's types, docs/control.schema.json and docs/CONTROL.md say the same thing:
/// the schema is what the generator reads off the types, what a running pipeline really answers
/// validates against it (python's jsonschema, an independent validator) and reads back as the
/// command's reply type, the schema and the page list exactly the commands Swift knows, and the
/// schema refuses what is not a control line.
final class ControlSchemaTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let schema = root + "/docs/control.schema.json"

    /// scripts/validate-events with the control schema over `lines`: exit status and report.
    static func validate(_ lines: [String], schema: String = schema) throws -> (status: Int32, report: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", root + "/scripts/validate-events", schema]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = output
        try p.run()
        input.fileHandleForWriting.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        try input.fileHandleForWriting.close()
        let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, report)
    }

    /// Every command Swift knows: the run's own and those the built-in node types answer.
    static var swiftCommands: [String] {
        let registry = TestSupport.freshRegistry()
        let nodeCommands = registry.names.compactMap { registry[$0] as? any AnswersControl.Type }.flatMap { $0.controlCommands.map(\.name) }
        return (ControlRequest.builtIn + nodeCommands).sorted()
    }

    /// docs/control.schema.json is the generator's output for the built-in node types, byte for
    /// byte as `avgraph inspect --control-schema` prints it (EndToEndTests check the program's own output).
    func testTheCommittedSchemaIsWhatTheTypesSay() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let generated = String(decoding: try encoder.encode(ControlSchema.json(TestSupport.freshRegistry())), as: UTF8.self) + "\n"
        XCTAssertEqual(try String(contentsOfFile: Self.schema, encoding: .utf8), generated,
                       "docs/control.schema.json is stale: run `.build/release/avgraph inspect --control-schema > docs/control.schema.json`")
        // Read off the decoders: required is what a decoder needs, optional what it asks for with `if present`.
        let defs = try XCTUnwrap(ControlSchema.json(TestSupport.freshRegistry())["$defs"])
        XCTAssertEqual(defs["set_request"]?["required"], ["cmd", "node", "option", "value"])
        XCTAssertEqual(defs["option_reply"]?["required"], ["node", "option", "value", "ok"])
        XCTAssertEqual(defs["clip_request"]?["x-reply"], "#/$defs/clip_saved")
        XCTAssertEqual(defs["stats_reply"]?["properties"]?["nodes"]?["items"]?["properties"]?["state"], ["type": "string"],
                       "a field the hand-kept schema had missed")
    }

    func testTheSchemaAndThePageListEveryCommandSwiftKnows() throws {
        let schema = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.schema))) as? [String: Any])
        let request = ((schema["$defs"] as? [String: Any])?["request"] as? [String: Any])
        let listed = ((request?["properties"] as? [String: Any])?["cmd"] as? [String: Any])?["enum"] as? [String]
        XCTAssertEqual(listed?.sorted(), Self.swiftCommands, "docs/control.schema.json lists the commands Swift knows")
        // The page's protocol table: a row per command, each sample request as Swift decodes it and the schema takes it.
        let page = try String(contentsOfFile: Self.root + "/docs/CONTROL.md", encoding: .utf8)
        let samples = page.split(separator: "\n").filter { $0.hasPrefix("| `{\"cmd\"") }.flatMap { row in
            row.split(separator: "`").filter { $0.hasPrefix("{\"cmd\"") }.map(String.init)
        }
        var documented = Set<String>()
        for sample in samples {
            switch ControlEnvelope.decode(line: Data(sample.utf8)) {
            case .success(let envelope): documented.insert(envelope.request.command)
            case .failure(let refusal): XCTFail("CONTROL.md's \(sample) does not decode: \(refusal.message)")
            }
        }
        XCTAssertEqual(documented.sorted(), Self.swiftCommands, "docs/CONTROL.md has a sample request for every command")
        let v = try Self.validate(samples)
        XCTAssertEqual(v.status, 0, v.report)
        XCTAssertTrue(v.report.contains("\(samples.count) valid, 0 invalid"), v.report)
    }

    func testRequestsRoundTripThroughTheirLine() throws {
        let requests: [ControlRequest] = [
            .set(.init(node: "video", option: "bitrate", value: .string("600k"))),
            .set(.init(node: "mix", option: "gain", value: .object(["mic": .number(1.5)]), at: 95)),
            .get(.init(node: "video", option: "bitrate")), .pause, .resume, .stop(reason: "done"), .stop(reason: nil),
            .stats, .watch, .graph, ClipSave(path: "/tmp/c.mp4").request,
        ]
        let lines = requests.map { String(decoding: ControlEnvelope($0, id: .int(7)).line, as: UTF8.self) }
        for (request, line) in zip(requests, lines) {
            guard case .success(let back) = ControlEnvelope.decode(line: Data(line.utf8)) else { return XCTFail("does not decode: \(line)") }
            XCTAssertEqual(back.request, request, line)
            XCTAssertEqual(back.id, .int(7), line)
        }
        XCTAssertEqual(Set(requests.map(\.command)).sorted(), Self.swiftCommands, "a sample of every command")
        // `ControlRequest` itself is Codable: the same line without the envelope's id.
        for request in requests {
            let data = try JSONEncoder().encode(request)
            XCTAssertEqual(try JSONDecoder().decode(ControlRequest.self, from: data), request, String(decoding: data, as: UTF8.self))
        }
        let v = try Self.validate(lines)
        XCTAssertEqual(v.status, 0, v.report)
    }

    /// The Swift API's commands carry the reply type the protocol's own table names for them.
    func testEachTypedCommandCarriesTheReplyItsCommandDeclares() {
        let specs = ControlSchema.commands(TestSupport.freshRegistry())
        var checked: [String] = []
        func check<Reply>(_ command: ControlCommand<Reply>) {
            let name = command.request.command
            XCTAssertTrue(specs.first { $0.name == name }?.reply == Reply.self, "\(name): \(Reply.self)")
            checked.append(name)
        }
        check(.set(node: "v", option: "bitrate", value: .string("1M")))
        check(.get(node: "v", option: "bitrate"))
        check(.pause)
        check(.resume)
        check(.stop(reason: "x"))
        check(.stats)
        check(.graph)
        check(.clip(save: "/tmp/c.mp4"))
        // `watch` turns the connection into a stream: the Swift API has `events` for it instead.
        XCTAssertEqual(Set(checked + ["watch"]).sorted(), Self.swiftCommands)
    }

    /// Every reply type, and a refusal, read back from its line as the command's reply type and as an
    /// untyped one: the same line again, and the schema takes it.
    func testRepliesRoundTripThroughTheirLine() throws {
        let stats = Event.Stats(nodes: [.init(node: "video", queue: [2], dropped: 0, emitted: [30], bytes: [1000], time: [1])],
                                mediaTime: 1, dropped: 0, droppedByKind: .init(video: 0, audio: 0), rss: 1 << 20, queuedBytes: 10)
        let graph = try JSONDecoder().decode(PipelineGraph.self, from: Data(#"""
            {"pipeline":"p","nodes":[{"name":"v","type":"h264","role":"filter","options":{"bitrate":"600k"},
             "live":[{"name":"bitrate","type":"bitrate","control":"text","range":"10k..200M","value":"600k","doc":"d"}]}],
             "edges":[{"from":"s","from_pad":"out","to":"v","to_pad":"in","rate":30}],"media_time":2}
            """#.utf8))
        let bodies: [(any ControlReplyBody, String)] = [
            (OptionReply(node: "video", option: "bitrate", value: "600000", at: 5), "set"), (EmptyReply(), "pause"),
            (WatchReply(), "watch"), (StatsReply(stats: stats, wall: 3, paused: false), "stats"), (graph, "graph"),
            (ClipSaved(path: "/tmp/c.mp4", packets: 40, seconds: 2), "clip"),
        ]
        let specs = ControlSchema.commands(TestSupport.freshRegistry())
        var lines: [String] = []
        for (body, command) in bodies {
            let spec = try XCTUnwrap(specs.first { $0.name == command })
            XCTAssertTrue(type(of: body) == spec.reply, "\(command) answers \(spec.reply)")
            let line = ControlReply(.success(body), id: .string("x")).line
            let typed = try ControlReply.decode(line: Data(line), as: spec.reply)
            XCTAssertEqual(typed.line, line)
            XCTAssertEqual(typed.id, .string("x"))
            XCTAssertEqual(try ControlReply.decode(line: Data(line)).line, line, "untyped")
            lines.append(String(decoding: line, as: UTF8.self))
        }
        let refusal = ControlReply.refused("no node named 'x'", id: .int(4))
        let back = try ControlReply.decode(line: Data(refusal.line), as: OptionReply.self)
        XCTAssertEqual(back.line, refusal.line)
        XCTAssertFalse(back.ok)
        lines.append(String(decoding: refusal.line, as: UTF8.self))
        let v = try Self.validate(lines)
        XCTAssertEqual(v.status, 0, v.report)
        XCTAssertTrue(v.report.contains("\(lines.count) valid, 0 invalid"), v.report)
    }

    func testTheSchemaRejectsWhatIsNotAControlLine() throws {
        for bad in [#"{"cmd":"explode"}"#, #"{"cmd":"set","node":"a","option":"b"}"#, #"{"cmd":"stats","extra":1}"#,
                    #"{"cmd":"clip","action":"load","path":"/a"}"#, #"{"ok":false}"#, #"{"ok":true,"surprise":1}"#,
                    #"{"ok":true,"node":"a","option":"b"}"#, #"[1,2]"#] {
            let v = try Self.validate([bad])
            XCTAssertEqual(v.status, 1, "accepted: \(bad)")
        }
    }

    /// A realtime run answering every command as its socket would (`answer(controlLine:)`),
    /// every line checked by the schema and read back as its Swift type; the clip it saves is
    /// probed by ffprobe.
    func testWhatARunAnswersValidatesAndReadsBack() throws {
        let dir = TestSupport.scratch()
        let checked = TestSupport.check("""
        realtime: true
        duration: 20s
        nodes:
          screen: {type: testsrc, size: 160x120, rate: 30}
          tone:   {type: tone, freq: 440}
          video:  {type: h264, in: screen, bitrate: 400k, gop: 15}
          audio:  {type: aac, in: tone}
          keep:   {type: clips, in: [video, audio], window: 5s}
        """, in: dir)
        XCTAssertTrue(checked.isValid, checked.diagnostics.map(\.description).joined(separator: "\n"))
        let run = try PipelineRun(checked, events: EventLog(output: .none))
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { try? run.run(); done.signal() }
        thread.start()
        defer { run.stop(reason: "test"); done.wait() }
        // Media held for a clip: two seconds of it.
        while run.stats().mediaTime < 2 { usleep(50_000) }
        var lines: [String] = []
        /// `refused`: a request the schema itself refuses; only its reply is validated.
        let specs = ControlSchema.commands(TestSupport.freshRegistry())
        func ask(_ line: String, refused: Bool = false) -> Data {
            let reply = run.answer(controlLine: Array(line.utf8))
            lines += (refused ? [] : [line]) + [String(decoding: reply, as: UTF8.self)]
            XCTAssertFalse(reply.contains(10), "one line")
            // Read as the reply type the command declares, it is the same line again.
            if case .success(let envelope) = ControlEnvelope.decode(line: Data(line.utf8)), let spec = specs.first(where: { $0.name == envelope.request.command }) {
                XCTAssertEqual((try? ControlReply.decode(line: Data(reply), as: spec.reply))?.line, reply, "\(line) reads back as \(spec.reply)")
            }
            return Data(reply)
        }
        let set = try ControlAnswer<OptionReply>.decode(line: ask(#"{"cmd":"set","node":"video","option":"bitrate","value":"300k","id":"a"}"#))
        XCTAssertEqual(set.body, OptionReply(node: "video", option: "bitrate", value: "300000"))
        XCTAssertEqual(set.id, .string("a"))
        let get = try ControlAnswer<OptionReply>.decode(line: ask(#"{"cmd":"get","node":"video","option":"bitrate"}"#))
        XCTAssertEqual(get.body?.value, "300000", "get reads what set changed")
        let later = try ControlAnswer<OptionReply>.decode(line: ask(#"{"cmd":"set","node":"video","option":"bitrate","value":350000,"at":"60s"}"#))
        XCTAssertEqual(later.body?.at, 60)
        XCTAssertEqual(later.body?.value, "350000")
        let stats = try ControlAnswer<StatsReply>.decode(line: ask(#"{"cmd":"stats","id":7}"#))
        XCTAssertEqual(stats.id, .int(7))
        XCTAssertEqual(stats.body?.stats.nodes.map(\.node), ["screen", "tone", "video", "audio", "keep"])
        XCTAssertGreaterThanOrEqual(stats.body?.stats.mediaTime ?? 0, 2)
        XCTAssertEqual(stats.body?.paused, false)
        let graph = try ControlAnswer<PipelineGraph>.decode(line: ask(#"{"cmd":"graph"}"#)).body
        XCTAssertEqual(graph?.edges.map { "\($0.from)->\($0.to)" }, ["screen->video", "tone->audio", "video->keep", "audio->keep"])
        XCTAssertNotNil(graph?.edges.first?.queue)
        XCTAssertTrue(try ControlAnswer<EmptyReply>.decode(line: ask(#"{"cmd":"pause"}"#)).ok)
        XCTAssertTrue(run.isPaused)
        XCTAssertEqual(try ControlAnswer<EmptyReply>.decode(line: ask(#"{"cmd":"pause"}"#)).error, "already paused")
        XCTAssertTrue(try ControlAnswer<EmptyReply>.decode(line: ask(#"{"cmd":"resume"}"#)).ok)
        XCTAssertEqual(try ControlAnswer<WatchReply>.decode(line: ask(#"{"cmd":"watch"}"#)).body, WatchReply())
        let clip = try ControlAnswer<ClipSaved>.decode(line: ask(#"{"cmd":"clip","action":"save","path":"\#(dir)/clip.mp4"}"#))
        XCTAssertTrue(clip.ok, clip.error ?? "")
        let probe = try TestSupport.probe(dir + "/clip.mp4")
        let seconds = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(seconds, clip.body?.seconds ?? -1, accuracy: 0.2, "the reply says how long the clip is")
        XCTAssertGreaterThan(clip.body?.packets ?? 0, 30)
        // Refusals: each says why, the id comes back even when the request is not understood.
        let refusals = [
            (#"{"cmd":"explode","id":3}"#, "unknown command 'explode'"),
            (#"{"cmd":"set","node":"video","option":"bitrate"}"#, "missing \"value\""),
            (#"{"cmd":"get","node":"nope","option":"bitrate"}"#, "no node named 'nope'"),
            (#"{"cmd":"get","node":"video","option":"bitrat"}"#, "has no option 'bitrat'"),
            (#"{"cmd":"set","node":"video","option":"bitrate","value":"fast"}"#, "video.bitrate"),
            (#"{"cmd":"set","node":"video","option":"gop","value":30}"#, "not live"),
            (#"{"cmd":"set","node":"video","option":"bitrate","value":1,"at":-4}"#, "\"at\" must be a media time"),
            (#"{"cmd":"clip","action":"load","path":"/x"}"#, "clip takes action 'save'"),
            (#"{not json"#, "malformed request"),
            (#"{"id":5}"#, "missing \"cmd\""),
        ]
        for (line, expected) in refusals {
            let answer = try ControlAnswer<EmptyReply>.decode(line: ask(line, refused: true))
            XCTAssertFalse(answer.ok, line)
            XCTAssertTrue(answer.error?.contains(expected) == true, "\(line): \(answer.error ?? "nil")")
        }
        XCTAssertEqual(try ControlAnswer<EmptyReply>.decode(line: ask(#"{"cmd":"explode","id":3}"#, refused: true)).id, .int(3))
        XCTAssertEqual(try ControlAnswer<EmptyReply>.decode(line: ask(#"{"id":5}"#, refused: true)).id, .int(5))
        XCTAssertTrue(try ControlAnswer<EmptyReply>.decode(line: ask(#"{"cmd":"stop","reason":"enough"}"#)).ok)
        let v = try Self.validate(lines)
        XCTAssertEqual(v.status, 0, v.report)
        XCTAssertTrue(v.report.contains("\(lines.count) valid, 0 invalid"), v.report)
    }

    /// `LivePipeline.control` asks in the protocol's types and gets them back, each typed by its
    /// command: a set the encoder takes, a get that reads it, a clip whose packets ffprobe counts.
    func testTheSwiftAPIAsksInTheProtocolsTypes() throws {
        let dir = TestSupport.scratch()
        try """
        realtime: true
        duration: 10s
        nodes:
          screen: {type: testsrc, size: 160x120, rate: 20}
          video:  {type: h264, in: screen, bitrate: 400k, gop: 10}
          keep:   {type: clips, in: video, window: 5s}
        """.write(toFile: dir + "/api.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/api.pipe", registry: TestSupport.registry)
        live.start()
        defer { live.stop(); try? live.wait() }
        while live.stats().mediaTime < 1.5 { usleep(50_000) }
        let set = try live.control(.set(node: "video", option: "bitrate", value: .int(250_000)))
        XCTAssertEqual(set.body, OptionReply(node: "video", option: "bitrate", value: "250000"), set.error ?? "")
        XCTAssertEqual(try live.control(.get(node: "video", option: "bitrate")).body?.value, "250000")
        let stats = try live.control(.stats)
        XCTAssertEqual(stats.body?.stats.nodes.count, 3)
        let clip = try live.control(.clip(save: dir + "/api.mp4"))
        let saved = try XCTUnwrap(clip.body, clip.error ?? "")
        let frames = try TestSupport.shell(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                                            "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", dir + "/api.mp4"])
        XCTAssertEqual(Int(frames.trimmingCharacters(in: .whitespacesAndNewlines)), saved.packets, "every packet of the clip decodes")
        XCTAssertEqual(try live.control(ControlCommand(.node(command: "clip", fields: [:]), reply: ClipSaved.self)).error,
                       "clip takes action 'save' and a 'path'")
    }
}
