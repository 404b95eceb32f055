import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// Pausing a run fed by Swift code (`app` source) cuts the paused span: the output holds what
/// was pushed less the pause, audio and video alike.
final class AppPauseTests: XCTestCase {
    func testPauseDuringAnAppFedRunCutsThePausedSpan() throws {
        let dir = TestSupport.scratch()
        try AppSourceTests.pipe(size: "360x640", out: "out.mp4").write(toFile: dir + "/app.pipe", atomically: true, encoding: .utf8)
        let events = EventLog(output: .none)
        let resumed = Box()
        events.onEvent { if case .resumed(let r) = $0.kind { resumed.set(r.pausedFor) } }
        let live = try LivePipeline(path: dir + "/app.pipe", events: events, registry: TestSupport.registry)
        live.start()
        let source = try XCTUnwrap(live.appSource(named: "phone"))
        let pusher = Thread { _ = AppSourceTests.push(source, width: 360, height: 640, seconds: 8, speed: 1); source.finish() }
        pusher.start()
        usleep(3_000_000)
        XCTAssertTrue(live.pause())
        usleep(2_000_000)
        XCTAssertTrue(live.resume())
        try live.wait()
        let paused = try XCTUnwrap(resumed.value)
        XCTAssertEqual(paused, 2, accuracy: 0.5)
        let probe = try TestSupport.probe(dir + "/out.mp4")
        let streams = probe["streams"] as? [[String: Any]] ?? []
        func span(_ type: String) -> Double {
            Double(streams.first { $0["codec_type"] as? String == type }?["duration"] as? String ?? "") ?? 0
        }
        let vd = span("video"), ad = span("audio")
        XCTAssertEqual(vd, 8 - paused, accuracy: 0.2, "video span: pushed 8 s, paused \(paused) s")
        XCTAssertEqual(ad, 8 - paused, accuracy: 0.2, "audio span: pushed 8 s, paused \(paused) s")
        XCTAssertEqual(vd, ad, accuracy: 0.15, "A/V spans")
        print("pause during a app-fed run: paused \(paused) s, video \(vd) s, audio \(ad) s")
    }

    final class Box: @unchecked Sendable {
        private let lock = NSLock()
        private var v: Double?
        func set(_ x: Double) { lock.lock(); v = x; lock.unlock() }
        var value: Double? { lock.lock(); defer { lock.unlock() }; return v }
    }
}
