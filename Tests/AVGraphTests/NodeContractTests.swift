import AVGraph
import AVGraphNodes
import AVGraphTesting
import Foundation
import XCTest

/// A filter whose `options` list leaves out a setting it reads: in `init`, or only in `negotiate`.
final class ForgetfulNode: Filter, Node, @unchecked Sendable {
    static let typeName = "forgetful"
    static let summary = "passes pictures on; forgot to list 'strength'"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let outputs = [PadSpec("out", [.rawVideo])]
    static let listed = Setting.int("listed", 0...9, default: 1, doc: "listed")
    static let strength = Setting.int("strength", 0...9, default: 3, doc: "declared, never listed")
    static let options = [listed.spec]
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [n.inputs[0].format] }
    let strength: Int
    init(_ setup: NodeSetup) throws { strength = setup[Self.strength] + setup[Self.listed] }
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { out.emit(buffer) }
}

final class ForgetsInNegotiateNode: Filter, Node, @unchecked Sendable {
    static let typeName = "forgets-in-negotiate"
    static let summary = "reads an unlisted setting in its format rule only"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let outputs = [PadSpec("out", [.rawVideo])]
    static let width = Setting.int("width", 16...4096, default: 64, doc: "declared, never listed")
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        var f = n.inputs[0].format
        f.width = n[Self.width]
        return [f]
    }
    init(_ setup: NodeSetup) throws {}
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { out.emit(buffer) }
}

/// A node type on no role class, and role classes with pads that contradict them.
final class RolelessNode: NodeHooks, Node, @unchecked Sendable {
    static let typeName = "roleless"
    static let summary = ""
    static let outputs = [PadSpec("out", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    init(_ setup: NodeSetup) throws {}
}

final class FilterWithoutOutputs: Filter, Node, @unchecked Sendable {
    static let typeName = "filter-without-outputs"
    static let summary = ""
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    init(_ setup: NodeSetup) throws {}
}

final class SourceWithInputs: Source, Node, @unchecked Sendable {
    static let typeName = "source-with-inputs"
    static let summary = ""
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let outputs = [PadSpec("out", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    init(_ setup: NodeSetup) throws {}
}

/// A sink whose `receive` is misspelled without `override`: it compiles as a plain method, and the
/// role's own `receive` refuses the first buffer by name instead of dropping it silently.
final class DeafSink: Sink, Node, @unchecked Sendable {
    static let typeName = "deaf"
    static let summary = ""
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    init(_ setup: NodeSetup) throws {}
    func recieve(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {}
}

final class NodeContractTests: XCTestCase {
    let video = StreamFormat.video(width: 64, height: 48, pixelFormat: "yuv420p", frameRate: Rational(25, 1))

    func testRegistryRefusesATypeWhosePadsDoNotFitItsRole() {
        let r = NodeRegistry()
        for (type, says) in [(RolelessNode.self as any Node.Type, "derives from none of Source, Filter and Sink"),
                             (FilterWithoutOutputs.self, "is a Filter but lacks inputs or outputs"),
                             (SourceWithInputs.self, "is a Source but declares inputs")] {
            XCTAssertThrowsError(try r.register(type)) { XCTAssertTrue("\($0)".contains(says), "\($0)") }
        }
        XCTAssertTrue(r.names.isEmpty)
    }

    func testEveryBuiltinTypeHasTheRoleItsPadsSay() {
        for t in BuiltinNodes.all {
            let expected: NodeRole = t.inputs.isEmpty ? .source : t.outputs.isEmpty ? .sink : .filter
            XCTAssertEqual(t.role, expected, t.typeName)
        }
    }

    func testASinkThatNeverOverridesReceiveFailsAtItsFirstBuffer() throws {
        let h = try NodeHarness(DeafSink.self, inputs: [video])
        XCTAssertThrowsError(try h.feed(TestMedia.videoFrame(width: 64, height: 48))) {
            XCTAssertTrue("\($0)".contains("DeafSink does not override receive(_:input:_:)"), "\($0)")
        }
    }

    func testTheHarnessRefusesANodeThatReadsASettingItsOptionsLeaveOut() throws {
        XCTAssertThrowsError(try NodeHarness(ForgetfulNode.self, inputs: [video])) {
            XCTAssertTrue("\($0)".contains("reads option 'strength' that its `options` list does not declare"), "\($0)")
        }
        XCTAssertThrowsError(try NodeHarness(ForgetsInNegotiateNode.self, inputs: [video])) {
            XCTAssertTrue("\($0)".contains("'forgets-in-negotiate' reads option 'width'"), "\($0)")
        }
        let feed = ConformanceCase.Feed(format: video, name: "camera", buffers: try Conformance.rawVideo(video))
        let problems = Conformance.verify(ConformanceCase(ForgetfulNode.self, inputs: [feed]))
        XCTAssertTrue(problems.contains { $0.contains("reads option 'strength'") }, problems.joined(separator: "\n"))
        // Reads of listed settings are welcome (ConformanceTests builds every built-in type this way).
        XCTAssertNoThrow(try NodeHarness(registry()["resize"]!, options: "size: 32x24", inputs: [video]))
    }

    func testARunRefusesANodeThatReadsASettingItsOptionsLeaveOutNamingIt() throws {
        let dir = TestSupport.scratch()
        let path = dir + "/forgetful.pipe"
        try """
        nodes:
          src: {type: testsrc, size: 64x48, rate: 25, duration: 1s}
          dim: {type: forgetful, in: src, listed: 2}
          out: {type: file, in: enc, path: out.mp4}
          enc: {type: h264, in: dim}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let checked = Checker(registry: registry()).check(path: path)
        XCTAssertTrue(checked.isValid, checked.diagnostics.map(\.description).joined(separator: "\n"))
        XCTAssertThrowsError(try PipelineRun(checked, events: EventLog(output: .none), realtime: false)) {
            XCTAssertTrue("\($0)".hasPrefix("node 'dim': node type 'forgetful' reads option 'strength'"), "\($0)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/out.mp4"), "a refused run writes nothing")
    }

    func registry() -> NodeRegistry {
        let r = TestSupport.freshRegistry()
        try! r.register(ForgetfulNode.self)
        return r
    }
}
