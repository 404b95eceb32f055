import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// `{"cmd": "mark", "label": "intro"}`: a command a node type of a test (as a plugin's) declares.
struct MarkRequest: Codable, Sendable {
    var label: String
    /// Optional: the schema must not require it.
    var note: String?
}

/// The reply to `mark`: the label and how many marks the node holds.
struct Marked: ControlReplyBody, SchemaAnnotated {
    var label: String
    var count: Int
    static let schemaDescription: String? = "mark: the label kept and how many the node holds."
    static var schemaKeywords: [String: [String: EventValue]] { ["count": ["minimum": .int(1)]] }
}

/// A sink that answers `mark` (its own command) and otherwise drops what it gets.
final class MarkerSink: Sink, Node, AnswersControl, @unchecked Sendable {
    static let typeName = "marker"
    static let summary = "answers `mark` (tests)"
    static let inputs = [PadSpec("in", Set(MediaKind.allCases), variadic: true)]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    static let controlCommands = [ControlCommandSpec("mark", fields: MarkRequest.self, reply: Marked.self, doc: "Keep a label (tests).")]

    /// Read and written only on the node's own thread (`answer` is asked there).
    private var labels: [String] = []

    init(_ setup: NodeSetup) throws {}

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {}

    func answer(_ request: NodeControlRequest) -> NodeControlAnswer {
        guard let mark = try? request.decode(MarkRequest.self) else { return .refused("mark takes a 'label'") }
        labels.append(mark.label)
        return .done(Marked(label: mark.label, count: labels.count))
    }
}

/// A node type from outside the built-in set brings its own command: the generated schema has
/// its request and reply (read off its types), `graph` lists it on the node, and what a running
/// pipeline answers to it validates against that schema and reads back as its reply type.
final class NodeCommandSchemaTests: XCTestCase {
    func testANodeTypesOwnCommandIsInTheSchemaAndItsRepliesValidate() throws {
        let registry = TestSupport.freshRegistry()
        try registry.register(MarkerSink.self, origin: "test-plugin.so")
        let schema = ControlSchema.json(registry)
        let defs = try XCTUnwrap(schema["$defs"])
        XCTAssertEqual(defs["mark_request"]?["required"], ["cmd", "label"], "note is optional: read off decodeIfPresent")
        XCTAssertEqual(defs["mark_request"]?["x-reply"], "#/$defs/marked")
        XCTAssertEqual(defs["marked"]?["properties"]?["count"], ["type": "integer", "minimum": 1])
        XCTAssertTrue(defs["request"]?["properties"]?["cmd"]?["enum"]?.strings?.contains("mark") == true)
        let dir = TestSupport.scratch()
        let schemaPath = dir + "/control.schema.json"
        try JSONEncoder().encode(schema).write(to: URL(fileURLWithPath: schemaPath))

        try """
        realtime: true
        duration: 20s
        nodes:
          screen: {type: testsrc, size: 160x120, rate: 20}
          marks:  {type: marker, in: screen}
        """.write(toFile: dir + "/mark.pipe", atomically: true, encoding: .utf8)
        let checked = Checker(registry: registry).check(path: dir + "/mark.pipe")
        XCTAssertTrue(checked.isValid, checked.diagnostics.map(\.description).joined(separator: "\n"))
        let run = try PipelineRun(checked, events: EventLog(output: .none))
        let done = DispatchSemaphore(value: 0)
        Thread { try? run.run(); done.signal() }.start()
        defer { run.stop(reason: "test"); done.wait() }
        // A sink that emits nothing leaves the run's media time at 0: wait for the source's pictures instead.
        let deadline = Date().addingTimeInterval(10)
        while (run.stats().nodes.first { $0.node == "screen" }?.emitted?.first ?? 0) < 5, Date() < deadline { usleep(50_000) }

        let graph = try XCTUnwrap(try ControlReply.decode(line: Data(run.answer(controlLine: Array(#"{"cmd":"graph"}"#.utf8))), as: PipelineGraph.self)
            .outcome.get() as? PipelineGraph)
        XCTAssertEqual(graph.nodes.first { $0.name == "marks" }?.commands?.map(\.needs), [["label"]])
        var lines: [String] = []
        for (i, label) in ["intro", "outro"].enumerated() {
            let request = #"{"cmd":"mark","label":"\#(label)","id":\#(i)}"#
            let reply = run.answer(controlLine: Array(request.utf8))
            lines += [request, String(decoding: reply, as: UTF8.self)]
            let marked = try XCTUnwrap(try ControlReply.decode(line: Data(reply), as: Marked.self).outcome.get() as? Marked)
            XCTAssertEqual(marked.label, label)
            XCTAssertEqual(marked.count, i + 1, "the node's own state, on its own thread")
        }
        let v = try ControlSchemaTests.validate(lines, schema: schemaPath)
        XCTAssertEqual(v.status, 0, v.report)
        XCTAssertTrue(v.report.contains("4 valid, 0 invalid"), v.report)
        // The built-in schema does not know `mark`: the line is checked against what the registry declares.
        XCTAssertEqual(try ControlSchemaTests.validate([lines[0]]).status, 1)
    }
}
