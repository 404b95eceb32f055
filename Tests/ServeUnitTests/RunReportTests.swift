import AVGraph
import AVGraphNodes
import AVGraphServe
import XCTest

/// What serve makes of its run's event lines: the page address from `page` (not stderr's prose),
/// hooks from `recording` and `uploaded`, `recording` from `eos` when the run did not say its files.
final class RunReportTests: XCTestCase {
    private func line(_ kind: Event.Kind, node: String? = nil) -> String { Event(kind, node: node, wall: 1.5).jsonLine }

    func testThePageEventGivesTheAddress() {
        var report = RunReport(sinkPaths: [:])
        XCTAssertEqual(report.take(line: line(.page(.init(url: "http://127.0.0.1:40001/")))), [.page("http://127.0.0.1:40001/")])
        XCTAssertEqual(report.take(line: "avgraph: operator page: http://127.0.0.1:1/"), [], "prose is no event")
        XCTAssertEqual(report.take(line: line(.warning(.init("x")))), [])
    }

    func testRecordingAndUploadBecomeHooksTyped() {
        var report = RunReport(sinkPaths: ["out": "/rec/a.mp4"])
        let recording = RecordingEvent(path: "/rec/a.mp4", part: 2, seconds: 5.0, bytes: 1000, frames: 150, finalized: true)
        XCTAssertEqual(report.take(line: line(.node(recording), node: "out")), [.hook("recording", [
            "node": .string("out"), "path": .string("/rec/a.mp4"), "part": .int(2), "seconds": .number(5), "bytes": .int(1000),
            "frames": .int(150), "finalized": .bool(true)])])
        let uploaded = UploadedEvent(path: "/rec/a.mp4", url: "https://h/a.mp4?***", status: 201, bytes: 10, attempts: 1, seconds: 0.5)
        XCTAssertEqual(report.take(line: line(.node(uploaded), node: "out")), [.hook("upload", [
            "node": .string("out"), "path": .string("/rec/a.mp4"), "url": .string("https://h/a.mp4?***"), "status": .int(201),
            "bytes": .int(10), "attempts": .int(1), "seconds": .number(0.5)])])
        let eos = Event.EndOfStream(mediaTime: 5, peakRSS: 1, reason: "SIGTERM", sinks: [.init(node: "out", bytes: 1000, mediaDuration: 5, frames: 150)])
        XCTAssertEqual(report.take(line: line(.eos(eos))), [.ended("SIGTERM")], "the file said itself already")
    }

    func testEosSaysTheFilesOfARunThatDidNot() {
        var report = RunReport(sinkPaths: ["out": "/rec/a.mp4"])
        let eos = Event.EndOfStream(mediaTime: 5, peakRSS: 1, reason: "end", sinks: [.init(node: "out", bytes: 9, mediaDuration: 4.5, frames: 135),
                                                                                   .init(node: "live", bytes: 1, mediaDuration: 1, frames: 1)])
        XCTAssertEqual(report.take(line: line(.eos(eos))), [.hook("recording", [
            "node": .string("out"), "path": .string("/rec/a.mp4"), "part": .int(1), "seconds": .number(4.5), "bytes": .int(9),
            "frames": .int(135), "finalized": .bool(true)]), .ended("end")])
    }

    func testThePublishersLeavingSaysItsMediaIsInTheRun() {
        var report = RunReport(sinkPaths: [:])
        let gone = PublisherEvent(state: .disconnected, session: 1, peer: "1.2.3.4:5", url: "publisher", reason: "ended", seconds: 8, packets: 600)
        XCTAssertEqual(report.take(line: line(.node(gone), node: "src")), [.publisherGone("1.2.3.4:5")])
        let came = PublisherEvent(state: .connected, session: 1, peer: "1.2.3.4:5", url: "publisher")
        XCTAssertEqual(report.take(line: line(.node(came), node: "src")), [])
    }
}
