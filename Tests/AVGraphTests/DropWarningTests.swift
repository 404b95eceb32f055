import AVGraph
import Foundation
import XCTest

/// A sink that takes 50 ms per picture: fed 30 pictures a second live, it keeps up with 20.
final class SlowSink: Sink, Node, @unchecked Sendable {
    static let typeName = "slow"
    static let summary = "takes 50 ms per buffer (tests)"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    init(_ setup: NodeSetup) throws {}
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { usleep(50_000) }
}

final class DropWarningTests: XCTestCase {
    /// A node that falls behind a live source loses pictures on its drop-oldest queue: the log says
    /// so as warnings naming the node, and together they count every drop `stats` counted.
    func testDropsOnANodesQueueAreSaidAsWarnings() throws {
        let registry = TestSupport.freshRegistry()
        try registry.register(SlowSink.self)
        let dir = TestSupport.scratch()
        let path = dir + "/slow.pipe"
        try """
        nodes:
          src: {type: testsrc, size: 64x64, rate: 30, duration: 3s}
          sink: {type: slow, in: src, queue: {size: 2, policy: drop-oldest}}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let checked = Checker(registry: registry).check(path: path)
        XCTAssertTrue(checked.isValid, "\(checked.diagnostics)")
        let box = EventBox()
        let log = EventLog(output: .none)
        log.addListener { box.add($0) }
        try PipelineRun(checked, events: log, realtime: true).run()

        let stats = try XCTUnwrap(box.events("stats").last)
        let sinkStats = try XCTUnwrap((stats["nodes"] as? [[String: Any]])?.first { $0["node"] as? String == "sink" })
        let dropped = try XCTUnwrap(sinkStats["dropped"] as? Int)
        // 90 pictures at 30/s against 20/s taken: about 30 dropped.
        XCTAssertGreaterThan(dropped, 10, "\(sinkStats)")
        let warnings = box.events("warning").filter { $0["node"] as? String == "sink" }.compactMap { $0["message"] as? String }
        XCTAssertGreaterThanOrEqual(warnings.count, 2, "the first drops at a stats tick, the rest at the end: \(warnings)")
        let said = warnings.map { message -> Int in
            XCTAssertTrue(message.contains("raw video buffers on input 1 (queue of 2, drop-oldest)"), message)
            return Int(message.split(separator: " ")[1]) ?? -1
        }
        XCTAssertEqual(said.reduce(0, +), dropped, "warnings \(warnings) against stats' \(dropped)")
        XCTAssertEqual(box.events("warning").filter { $0["node"] as? String == "src" }.count, 0)
    }
}
