import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// A filter whose eleventh picture takes 3 s (tests): a `set` of its live `level` waits for it.
final class StallingFilter: Filter, Node, @unchecked Sendable {
    static let typeName = "stalling"
    static let summary = "holds its eleventh picture 3 s; a live option (tests)"
    static let inputs = [PadSpec("in", [.rawVideo])]
    static let outputs = [PadSpec("out", [.rawVideo])]
    static let level = Setting.int("level", 0...1000, default: 0, live: true, doc: "a live option (tests)")
    static let options = [level.spec]
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [n.inputs[0].format] }
    private var pictures = 0
    /// Set while the eleventh picture is held: the test asks while the node is busy.
    static let busy = ConditionLock(false)
    init(_ setup: NodeSetup) throws {}
    override func set(option: String, to value: OptionValue) throws {}
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        pictures += 1
        if pictures == 11 {
            Self.busy.withLockWakingAll { $0 = true }
            usleep(3_000_000)
        }
        out.emit(buffer, output: 0)
    }
}

/// The async `control` parks no thread: 64 `set`s waiting at once for a node that is busy cost
/// no thread each, and every one is answered when the node takes its change.
final class AsyncControlThreadTests: XCTestCase {
    static func threads() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("Threads:") }
            .flatMap { Int($0.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
    }

    func testSixtyFourSetsWaitingForABusyNodeParkNoThreadEach() async throws {
        let registry = TestSupport.freshRegistry()
        try registry.register(StallingFilter.self)
        let dir = TestSupport.scratch()
        try """
        realtime: true
        nodes:
          src:   {type: testsrc, size: 64x64, rate: 30, duration: 4s}
          stall: {type: stalling, in: src}
          sink:  {type: null, in: stall}
        """.write(toFile: dir + "/stall.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/stall.pipe", registry: registry)
        let run = Task { try await live.run() }
        // Into the stall (the eleventh picture, held 3 s).
        while !StallingFilter.busy.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        let before = Self.threads()
        let started = Date()
        let answers = Task {
            try await withThrowingTaskGroup(of: String.self) { group in
                for i in 0..<64 { group.addTask { try await live.control(.set(node: "stall", option: "level", value: .int(i))).value } }
                var values: [String] = []
                for try await v in group { values.append(v) }
                return values
            }
        }
        try await Task.sleep(for: .milliseconds(500))
        let waiting = Self.threads()
        let values = try await answers.value
        let waited = Date().timeIntervalSince(started)
        print("async control: \(before) threads before, \(waiting) with 64 sets waiting; all answered in \(String(format: "%.2f", waited)) s")
        XCTAssertEqual(Set(values), Set((0..<64).map(String.init)), "every set answered with its value")
        XCTAssertLessThan(waiting - before, 16, "the waiting sets hold no thread each")
        XCTAssertGreaterThan(waited, 1, "they waited for the busy node")
        try await run.value
    }
}
