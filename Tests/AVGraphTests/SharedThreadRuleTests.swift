import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// A filter that says it may share its producers' thread and keeps deadlines (tests): refused.
final class TickingGuest: Filter, Node, @unchecked Sendable {
    static let typeName = "ticking-guest"
    static let summary = "shares its producers' thread and ticks (tests): a contract fault"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let outputs = [PadSpec("out", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func sharesProducerThread(options: OptionValues) -> Bool { true }
    static func keepsDeadlines(options: OptionValues) -> Bool { true }
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [n.inputs[0].format] }
    init(_ setup: NodeSetup) throws {}
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { out.emit(buffer, output: 0) }
}

/// Which nodes run on their producers' thread (`PipelineRun.threadHosts`), decided from the
/// checked graph alone, and the rule `check` enforces: a node with deadlines never shares.
final class SharedThreadRuleTests: XCTestCase {
    static let privacyImage = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("assets/privacy.png").path

    /// Each node's name with the name of the node whose thread runs it.
    func hosts(_ yaml: String, registry: NodeRegistry = TestSupport.registry, _ name: String = #function) throws -> [String: String] {
        let checked = Checker(registry: registry).check(path: try write(yaml, name))
        XCTAssertTrue(checked.isValid, checked.diagnostics.map(\.description).joined(separator: "\n"))
        let (hosts, order) = PipelineRun.threadHosts(checked.nodes)
        XCTAssertEqual(order.count, checked.nodes.count)
        return Dictionary(uniqueKeysWithValues: checked.nodes.indices.map { (checked.nodes[$0].name, checked.nodes[hosts[$0]].name) })
    }

    func write(_ yaml: String, _ name: String) throws -> String {
        let path = TestSupport.scratch(name) + "/p.pipe"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func testAPassthroughRecordingRunsOnItsSourcesThread() throws {
        let h = try hosts("""
            realtime: true
            nodes:
              src:     {type: rtmp, url: "rtmp://127.0.0.1:1935/live/phone", listen: true}
              privacy: {type: privacy, in: src.video, image: \(Self.privacyImage)}
              video:   {type: h264, in: privacy, passthrough: auto}
              audio:   {type: aac, in: src.audio, passthrough: auto}
              out:     {type: file, in: [video, audio], path: out.mp4}
            """)
        XCTAssertEqual(h, ["src": "src", "privacy": "src", "video": "src", "audio": "src", "out": "src"])
    }

    func testEncodersThatEncodeScalersAndTickingNodesKeepTheirOwnThreads() throws {
        let h = try hosts("""
            realtime: true
            nodes:
              src:     {type: testsrc, size: 320x240, rate: 30}
              fit:     {type: resize, in: src, size: 160x120}
              privacy: {type: privacy, in: fit, image: \(Self.privacyImage)}
              smooth:  {type: fps, in: privacy, rate: 30}
              video:   {type: h264, in: smooth}
              out:     {type: file, in: [video], path: out.mp4}
            """)
        XCTAssertEqual(h["fit"], "fit", "a scaler works on every picture")
        XCTAssertEqual(h["privacy"], "fit", "privacy is light: on its producer's thread")
        XCTAssertEqual(h["smooth"], "smooth", "fps keeps deadlines")
        XCTAssertEqual(h["video"], "video", "an encoder that encodes")
        XCTAssertEqual(h["out"], "video", "the file on its one producer's thread")
    }

    func testAFileFedByTwoThreadsKeepsItsOwn() throws {
        let h = try hosts("""
            realtime: true
            nodes:
              pic:   {type: testsrc, size: 160x120, rate: 30}
              tone:  {type: tone, freq: 440}
              video: {type: h264, in: pic}
              audio: {type: aac, in: tone}
              out:   {type: file, in: [video, audio], path: out.mp4}
            """)
        XCTAssertEqual(h["out"], "out")
    }

    func testANodeThatSharesAndTicksIsRefusedByCheck() throws {
        let registry = TestSupport.freshRegistry()
        try registry.register(TickingGuest.self)
        let checked = Checker(registry: registry).check(path: try write("""
            nodes:
              src:  {type: testsrc, size: 160x120, rate: 30}
              odd:  {type: ticking-guest, in: src}
              sink: {type: null, in: odd}
            """, #function))
        let errors = checked.diagnostics.filter { $0.severity == .error }
        XCTAssertEqual(errors.count, 1, "\(checked.diagnostics)")
        XCTAssertTrue(errors.first?.message.contains("a shared thread never ticks the nodes it runs") == true, "\(errors)")
        XCTAssertTrue(errors.first?.description.contains("p.pipe:3:") == true, "at the node's type: \(errors)")
    }
}
