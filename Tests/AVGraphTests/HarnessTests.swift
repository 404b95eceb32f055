import AVGraph
import AVGraphTesting
import AVGraphNodes
import Foundation
import XCTest

/// Built-in nodes driven by hand through `NodeHarness`: no threads, no pipeline, the node's
/// own contract and options, and assertions on the frames it emits.
final class HarnessTests: XCTestCase {
    func type(_ name: String) throws -> any Node.Type { try XCTUnwrap(TestSupport.registry[name]) }

    func luma(_ f: Frame, _ x: Int, _ y: Int) -> UInt8 { f.plane(0)![y * f.lineSize(0) + x] }

    func testResizeFitsIntoTheCanvasWithBars() throws {
        let h = try NodeHarness(type("resize"), options: "size: 320x180, mode: fit",
                                inputs: [.video(width: 180, height: 390, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
        try h.feed(TestMedia.videoFrame(width: 180, height: 390, pts: 7) { _, _ in 200 })
        // Offline, pictures are resized a core each (FrameLanes) and handed on in order as the
        // next ones arrive, or at the end.
        try h.finish()
        let out = h.emittedFrames()
        XCTAssertEqual(out.count, 1)
        let f = try XCTUnwrap(out.first)
        XCTAssertEqual([f.width, f.height], [320, 180])
        XCTAssertEqual(f.pts, 7)
        XCTAssertEqual(luma(f, 2, 90), 16, "left bar is black")
        XCTAssertEqual(luma(f, 317, 90), 16, "right bar is black")
        XCTAssertEqual(Int(luma(f, 160, 90)), 200, accuracy: 2, "content in the middle")
    }

    func testResizeOfflineKeepsOrderAcrossLanesAndRealtimeHandsOnAtOnce() throws {
        let offline = try NodeHarness(type("resize"), options: "size: 320x180, mode: fit",
                                      inputs: [.video(width: 180, height: 390, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
        for i in 0..<12 {
            try offline.feed(TestMedia.videoFrame(width: 180, height: 390, pts: Int64(i)) { _, _ in UInt8(40 + i * 15) })
        }
        // Up to a lane's worth of pictures may still be in work until the end.
        var out = offline.emittedFrames()
        try offline.finish()
        out += offline.emittedFrames()
        XCTAssertEqual(out.map(\.pts), (0..<12).map { Int64($0) }, "arrival order")
        for (i, f) in out.enumerated() { XCTAssertEqual(Int(luma(f, 160, 90)), 40 + i * 15, accuracy: 2, "picture \(i)'s own content") }

        let live = try NodeHarness(type("resize"), options: "size: 320x180, mode: fit",
                                   inputs: [.video(width: 180, height: 390, pixelFormat: "yuv420p", frameRate: Rational(30, 1))],
                                   realtime: true)
        try live.feed(TestMedia.videoFrame(width: 180, height: 390, pts: 3) { _, _ in 200 })
        XCTAssertEqual(live.emittedFrames().map(\.pts), [3], "realtime: handed on before receive returns")
    }

    func testOrientTurnsARightTaggedBufferClockwise() throws {
        let h = try NodeHarness(type("orient"), inputs: [.video(width: 40, height: 20, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
        // Stored luma grows with the column; shown turned 90° clockwise it grows down the rows.
        try h.feed(TestMedia.videoFrame(width: 40, height: 20, orientation: .right) { x, _ in UInt8(x * 4) })
        let f = try XCTUnwrap(h.emittedFrames().first)
        XCTAssertEqual([f.width, f.height], [20, 40])
        XCTAssertEqual(f.orientation, .up)
        for (x, y) in [(0, 0), (19, 0), (5, 13), (19, 39)] { XCTAssertEqual(luma(f, x, y), UInt8(y * 4), "(\(x), \(y))") }
    }

    func testOrientPassesAnUprightFrameThroughUntouched() throws {
        let h = try NodeHarness(type("orient"), inputs: [.video(width: 40, height: 20, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
        let frame = try TestMedia.videoFrame(width: 40, height: 20)
        try h.feed(frame)
        XCTAssertEqual(h.emittedFrames().first?.plane(0), frame.plane(0), "same buffer, no copy")
    }

    func testPrivacySwapsInOnePreparedCard() throws {
        let image = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("assets/privacy.png").path
        let h = try NodeHarness(type("privacy"), options: "image: \(image), enabled: true",
                                inputs: [.video(width: 640, height: 360, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
        let a = try TestMedia.videoFrame(width: 640, height: 360, pts: 0), b = try TestMedia.videoFrame(width: 640, height: 360, pts: 1)
        try h.feed(a)
        try h.feed(b)
        let out = h.emittedFrames()
        XCTAssertEqual(out.map(\.pts), [0, 1])
        XCTAssertNotEqual(out[0].plane(0), a.plane(0), "the picture is replaced")
        XCTAssertEqual(out[0].plane(0), out[1].plane(0), "one card, swapped in by reference")
        XCTAssertGreaterThan(luma(out[0], 290, 190), 200, "the lock of the card is bright")
        try h.set("enabled", .bool(false))
        let c = try TestMedia.videoFrame(width: 640, height: 360, pts: 2)
        try h.feed(c)
        XCTAssertEqual(h.emittedFrames().first?.plane(0), c.plane(0), "off: the frame passes")
    }

    func testFpsRepeatsTheLastFrameThroughAShortStall() throws {
        let h = try NodeHarness(type("fps"), options: "rate: 30, hold: 2s",
                                inputs: [.video(width: 16, height: 16, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
        var fed: [Frame] = []
        for pts in [0, 1, 2, 10] as [Int64] {
            let f = try TestMedia.videoFrame(width: 16, height: 16, pts: pts)
            fed.append(f)
            try h.feed(f)
        }
        try h.endInput()
        try h.finish()
        let out = h.emittedFrames()
        XCTAssertEqual(out.map(\.pts), Array(0...10))
        for r in out[3..<10] { XCTAssertEqual(r.plane(0), fed[2].plane(0), "repeats are references to the last frame") }
        XCTAssertEqual(out[10].plane(0), fed[3].plane(0))
    }

    func testMixerFillsALateInputWithSilence() throws {
        let mono = StreamFormat.audio(sampleRate: 48000, channels: 1, sampleFormat: "fltp")
        let h = try NodeHarness(type("mixer"), options: "rate: 48000, channels: 1", inputs: [mono, mono], inputNames: ["app", "mic"])
        // The app plays from 0; the mic starts 0.1 s late.
        for block in 0..<10 { try h.feed(TestMedia.tone(freq: 440, firstSample: Int64(block * 1024)), input: 0) }
        for block in 0..<6 { try h.feed(TestMedia.tone(freq: 880, firstSample: 4800 + Int64(block * 1024)), input: 1) }
        try h.endInput(0)
        try h.endInput(1)
        try h.finish()
        let out = h.emittedFrames()
        XCTAssertEqual(out.first?.pts, 0)
        var next: Int64 = 0
        var samples: [Float] = []
        for f in out {
            XCTAssertEqual(f.pts, next, "continuous output")
            next += Int64(f.sampleCount)
            f.plane(0)!.withMemoryRebound(to: Float.self, capacity: f.sampleCount) { samples += UnsafeBufferPointer(start: $0, count: f.sampleCount) }
        }
        XCTAssertGreaterThanOrEqual(samples.count, 10 * 1024)
        let before = TestSupport.toneLevel(samples[0..<4800], freq: 880, rate: 48000)
        let after = TestSupport.toneLevel(samples[4800..<9600], freq: 880, rate: 48000)
        XCTAssertLessThan(before, 0.01, "no mic before it starts")
        XCTAssertEqual(after, 0.25, accuracy: 0.03, "mic after its start")
        XCTAssertEqual(TestSupport.toneLevel(samples[0..<4800], freq: 440, rate: 48000), 0.25, accuracy: 0.03)
    }

    func testATimedChangeIsTakenWhenTheMediaTimeReachesIt() throws {
        let format = StreamFormat.video(width: 64, height: 64, pixelFormat: "yuv420p", frameRate: Rational(10, 1))
        let image = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("assets/privacy.png").path
        let h = try NodeHarness(type("privacy"), options: "image: \(image)", inputs: [format])
        try h.set("enabled", .bool(true), at: 0.5)
        let fed = try (0..<10).map { try TestMedia.videoFrame(width: 64, height: 64, pts: Int64($0), timeBase: Rational(1, 10)) }
        try h.feed(fed)
        let covered = zip(h.emittedFrames(), fed).map { $0.plane(0) != $1.plane(0) }
        XCTAssertEqual(covered, (0..<10).map { $0 >= 5 }, "the card from the picture at 0.5 s on")
        XCTAssertEqual(h.events(named: "applied").first?["media_time"]?.double, 0.5)
    }

    /// With several inputs a timed change waits for the slowest: where it shows in the mix does not
    /// depend on how far the other input ran ahead (the mixer lets one run 0.5 s ahead).
    func testATimedChangeOfAMixerWaitsForItsSlowestInput() throws {
        let mono = StreamFormat.audio(sampleRate: 48000, channels: 1, sampleFormat: "fltp")
        let h = try NodeHarness(type("mixer"), options: "rate: 48000, channels: 1", inputs: [mono, mono], inputNames: ["app", "mic"])
        try h.set("mute", .perInput(["mic": .bool(true)]), at: 1.0)
        for block in 0..<94 { try h.feed(TestMedia.tone(freq: 440, firstSample: Int64(block * 1024)), input: 0) }
        for block in 0..<94 { try h.feed(TestMedia.tone(freq: 880, firstSample: Int64(block * 1024)), input: 1) }
        try h.endAll()
        let applied = try XCTUnwrap(h.events(named: "applied").first?["media_time"]?.double)
        XCTAssertEqual(applied, 1.0, accuracy: 1024 / 48000.0, "taken when the microphone reached 1 s, not when the app did")
        let samples = try h.emittedSamples().map(Float.init)
        XCTAssertEqual(TestSupport.toneLevel(samples[38400..<45600], freq: 880, rate: 48000), 0.25, accuracy: 0.03, "the mic before 0.95 s")
        XCTAssertLessThan(TestSupport.toneLevel(samples[50400..<72000], freq: 880, rate: 48000), 0.01, "no mic from 1.05 s on")
    }
}
