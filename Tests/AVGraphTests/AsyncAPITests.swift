import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// The async embedding API: `try await run()` with cancellation that still finalizes the file,
/// `for await event in live.events` ending after `eos`, `control(_:)` typed by its command.
final class AsyncAPITests: XCTestCase {
    static let pipe = """
    realtime: true
    nodes:
      screen: {type: testsrc, size: 320x240, rate: 30}
      video:  {type: h264, in: screen, bitrate: 500k}
      out:    {type: file, in: [video], path: out.mp4}
    """

    func testCancellingTheRunFinalizesTheFileAndEndsTheEvents() async throws {
        let dir = TestSupport.scratch()
        try Self.pipe.write(toFile: dir + "/live.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/live.pipe", registry: TestSupport.registry)
        // Subscribed before the start: every event of the run, `start` to `eos`.
        let events = live.events.makeAsyncIterator()
        let run = Task { try await live.run() }
        let collected = Task {
            var names: [String] = [], stopping: String?
            var iterator = events
            while let event = await iterator.next() {
                names.append(event.kind.name)
                if case .stopping(let s) = event.kind { stopping = s.reason }
            }
            return (names, stopping)
        }
        try await Task.sleep(for: .seconds(2))

        let stats = try await live.control(.stats)
        XCTAssertGreaterThan(stats.stats.mediaTime, 0.5, "the run is running")
        let set = try await live.control(.set(node: "video", option: "bitrate", value: .string("300k")))
        XCTAssertEqual(set.value, "300000")
        let got = try await live.control(.get(node: "video", option: "bitrate"))
        XCTAssertEqual(got.value, "300000")
        do {
            _ = try await live.control(.get(node: "video", option: "nope"))
            XCTFail("an unknown option is refused")
        } catch let refusal as ControlRefusal {
            XCTAssertTrue(refusal.message.contains("has no option 'nope'"), refusal.message)
        }
        let graph = try await live.control(.graph)
        XCTAssertEqual(graph.nodes.map(\.name), ["screen", "video", "out"])

        run.cancel()
        try await run.value  // returns, no error, once the file is written
        let (names, stopping) = await collected.value
        XCTAssertEqual(names.first, "start")
        XCTAssertEqual(names.last, "eos", "the events end with the run")
        XCTAssertEqual(stopping, "cancelled")
        // A sequence made after the end ends at once.
        var late = live.events.makeAsyncIterator()
        let nothing = await late.next()
        XCTAssertNil(nothing)

        let probe = try TestSupport.probe(dir + "/out.mp4", extra: ["-count_packets"])
        let video = try XCTUnwrap((probe["streams"] as? [[String: Any]])?.first)
        XCTAssertEqual(video["codec_name"] as? String, "h264")
        let duration = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(duration, 2, accuracy: 0.6, "cancelled after 2 s")
        let packets = Double(video["nb_read_packets"] as? String ?? "") ?? 0
        XCTAssertEqual(packets, duration * 30, accuracy: 3, "every picture of what was recorded")
    }
}
