import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// An in-process producer that leaves (`AppSource.leave()`) and does not come back before the
/// run is stopped: the recording ends where its media ended, not where the run stopped.
final class AppSourceEndTests: XCTestCase {
    func duration(_ path: String, _ stream: String) throws -> Double {
        let s = try TestSupport.shell(["ffprobe", "-v", "error", "-select_streams", "\(stream):0", "-show_entries", "stream=duration",
                                       "-of", "csv=p=0", path])
        return Double(s.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    func testProducerThatLeavesThenStopEndsWhereItsMediaEnded() throws {
        let dir = TestSupport.scratch()
        let yaml = AppSourceTests.pipe(size: "360x640", out: "out.mp4")
            .replacingOccurrences(of: "{type: app, size: 360x640}", with: "{type: app, size: 360x640, buffer: 16}")
        try yaml.write(toFile: dir + "/app.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/app.pipe", registry: TestSupport.registry)
        live.start()
        let source = try XCTUnwrap(live.appSource(named: "phone"))
        _ = AppSourceTests.push(source, width: 360, height: 640, seconds: 4, speed: 1)
        source.leave()
        usleep(2_500_000)
        live.stop()
        try live.wait()
        let video = try duration(dir + "/out.mp4", "v"), audio = try duration(dir + "/out.mp4", "a")
        XCTAssertEqual(video, 4, accuracy: 0.2, "video: the 4 s pushed, not the 2.5 s wait after")
        XCTAssertEqual(audio, 4, accuracy: 0.2, "audio: the 4 s pushed, not the 2.5 s wait after")
        // The pushed media itself ends 11 ms apart (audio in 1024-sample blocks); measured: video 4.033, audio 3.989.
        XCTAssertEqual(video, audio, accuracy: 2.0 / 30, "audio and video end together")
    }
}
