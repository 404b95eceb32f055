@_spi(Testing) import AVGraph
import AVGraphNodes
import AVGraphTesting
import Foundation
import XCTest

/// Memory that nodes hold themselves: `check` warns when it alone is over `memory-limit`, and a
/// `clips` window lets go of old media as the clock runs, not only when a packet arrives.
final class BudgetTests: XCTestCase {
    /// Queues hold references: a picture queued ten times (repeats, a fan-out to several nodes)
    /// is one picture's memory, and it is freed when its last queued reference leaves.
    func testAPictureQueuedManyTimesCountsOnceAgainstTheMemoryLimit() throws {
        let src = try NodeHarness.frames(from: XCTUnwrap(TestSupport.registry["testsrc"]), options: "size: 1280x720, rate: 30, duration: 0.1s")
        let a = src.frames[0], b = src.frames[1]
        XCTAssertEqual(a.byteCount, b.byteCount)
        XCTAssertGreaterThanOrEqual(a.byteCount, 1280 * 720 * 3 / 2)
        let budget = MemoryBudget(limit: 3 * a.byteCount)
        let repeats = (0..<10).map { _ in MediaBuffer.frame(a.ref()) }
        for r in repeats { budget.add(r) }
        XCTAssertEqual(budget.used, a.byteCount, "ten references to one picture")
        XCTAssertFalse(budget.isOver)
        budget.add(.frame(b))
        XCTAssertEqual(budget.used, 2 * a.byteCount, "a second picture")
        for r in repeats.dropLast() { budget.release(r) }
        XCTAssertEqual(budget.used, 2 * a.byteCount, "one reference to the first picture is still queued")
        budget.release(repeats.last!)
        XCTAssertEqual(budget.used, a.byteCount)
        budget.release(.frame(b))
        XCTAssertEqual(budget.used, 0)
        budget.hold(4096)
        XCTAssertEqual(budget.used, 4096, "memory a node holds itself still adds up")
        budget.hold(-4096)
        XCTAssertEqual(budget.used, 0)
    }

    func testCheckWarnsWhenAClipsWindowOrAnIngestBufferExceedsTheMemoryLimit() {
        let dir = TestSupport.scratch()
        let phoneLine = "  phone: {type: socket, path: \(dir)/phone.sock, size: 1170x2532, buffer: 64}"
        let bufferColumn = phoneLine.utf8.count - 2
        let over = TestSupport.check("""
        memory-limit: 50MB
        nodes:
          phone: {type: socket, path: \(dir)/phone.sock, size: 1170x2532, buffer: 64}
          src: {type: testsrc, size: 320x240}
          enc: {type: h264, in: src, bitrate: 8M}
          keep: {type: clips, in: enc, window: 60s}
          out: {type: null, in: [phone.video, phone.app, phone.mic]}
        """, in: dir)
        XCTAssertTrue(over.isValid, "warnings only: \(over.diagnostics)")
        let warnings = over.diagnostics.filter { $0.severity == .warning }
        // 64 x 1170x2532 nv12 (4,443,822 bytes each) = 284 MB; 60 s at 8 Mbit/s = 60 MB.
        XCTAssertTrue(warnings.contains { $0.location.line == 3 && $0.location.column == bufferColumn && $0.message.contains("64 pictures of 1170x2532 nv12")
            && $0.message.contains("284 MB") && $0.message.contains("memory-limit of 50.0 MB") }, "\(warnings)")
        XCTAssertTrue(warnings.contains { $0.location.line == 6 && $0.location.column == 40 && $0.message.contains("60s window at 8000 kbit/s")
            && $0.message.contains("60.0 MB") }, "\(warnings)")

        let within = TestSupport.check("""
        memory-limit: 400MB
        nodes:
          phone: {type: socket, path: \(dir)/phone.sock, size: 1170x2532, buffer: 64}
          src: {type: testsrc, size: 320x240}
          enc: {type: h264, in: src, bitrate: 8M}
          keep: {type: clips, in: enc, window: 60s}
          out: {type: null, in: [phone.video, phone.app, phone.mic]}
        """, in: dir, name: "within")
        XCTAssertEqual(within.diagnostics.filter { $0.severity == .warning }.count, 0, "\(within.diagnostics)")
    }

    /// 6 s of H.264 into a 2 s window: a clip can be saved; once the clock has run a whole window
    /// past the last packet with none arriving (over the budget video is dropped upstream), the
    /// window holds nothing, so its bytes leave the budget and video can flow again.
    func testAClipsWindowSlidesOnTheClockWithoutPackets() throws {
        let registry = TestSupport.registry
        let (format, frames) = try NodeHarness.frames(from: try XCTUnwrap(registry["testsrc"]), options: "size: 64x48, rate: 10, duration: 6s")
        XCTAssertEqual(frames.count, 60)
        let encoder = try NodeHarness(try XCTUnwrap(registry["h264"]), options: "bitrate: 200k, gop: 10", inputs: [format])
        try encoder.feed(frames)
        try encoder.endAll()
        let packets = encoder.emittedPackets()
        XCTAssertEqual(packets.count, 60)
        let clips = try NodeHarness(try XCTUnwrap(registry["clips"]), options: "window: 2s", inputs: [encoder.outputFormats[0]], realtime: true)
        for p in packets { try clips.feed(.packet(p)) }
        let responder = try XCTUnwrap(clips.node as? any AnswersControl)
        func save(_ path: String) -> NodeControlAnswer {
            responder.answer(NodeControlRequest(command: "clip", line: ControlEnvelope(ClipSave(path: path).request).line))
        }
        let dir = TestSupport.scratch()

        try clips.tick(at: 6.0)
        guard case .done(let saved) = save(dir + "/before.mp4") else { return XCTFail("the first clip was refused") }
        // The window (2 s) plus the rest of the GOP it starts in: 2 to 3 s of 10 fps.
        let kept = try XCTUnwrap(saved as? ClipSaved).packets
        XCTAssertTrue((20...30).contains(kept), "\(kept) packets")
        let probed = try TestSupport.shell(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                                            "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", dir + "/before.mp4"])
        XCTAssertEqual(Int(probed.trimmingCharacters(in: .whitespacesAndNewlines)), kept)

        // 1.5 s later, no packet: the window still reaches back into what is held.
        try clips.tick(at: 7.5)
        guard case .done = save(dir + "/during.mp4") else { return XCTFail("the clip during the window was refused") }
        // More than a window after the last packet: nothing is held any more.
        try clips.tick(at: 8.5)
        guard case .refused(let why) = save(dir + "/after.mp4") else { return XCTFail("a clip of nothing was written") }
        XCTAssertTrue(why.hasSuffix("held yet"), why)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/after.mp4"))
    }
}
