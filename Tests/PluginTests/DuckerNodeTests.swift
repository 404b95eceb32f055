import AVGraph
import AVGraphTesting
import Foundation
import XCTest

/// The ducker plugin's node, loaded from its library and driven through `NodeHarness`.
final class DuckerNodeTests: XCTestCase {
    var type: any Node.Type { get throws { try XCTUnwrap(Plugins.registry()["ducker"]) } }
    let mono = StreamFormat.audio(sampleRate: 48000, channels: 1, sampleFormat: "fltp")

    func harness(_ options: String, realtime: Bool = false) throws -> NodeHarness {
        try NodeHarness(type, options: options, inputs: [mono, mono], inputNames: ["app", "mic"], pads: ["main", "key"], realtime: realtime)
    }

    /// Level in dBFS of `samples` between two times.
    func level(_ samples: [Double], _ from: Double, _ to: Double) -> Double {
        TestMedia.dBFS(samples[Int(from * 48000)..<min(samples.count, Int(to * 48000))])
    }

    func testMainIsLoweredByDepthWhileTheKeySpeaksAndRecoversAfterRelease() throws {
        let h = try harness("depth: 15, threshold: -40, attack: 20ms, release: 300ms, hold: 100ms")
        // App sound for 4 s at -12 dBFS; the mic speaks (-20 dBFS) from 1 s to 2 s.
        let app = try TestMedia.toneBlocks(freq: 440, dBFS: -12, seconds: 4)
        let mic = try TestMedia.toneBlocks(freq: 880, dBFS: -20, seconds: 1, start: 1)
        // Feed main ahead of the key, as an eager scheduler would: main must wait for the key.
        try h.feed(Array(app[0..<80]), input: 0)
        try h.feed(mic, input: 1)
        try h.feed(Array(app[80...]), input: 0)
        try h.endAll()
        let out = try h.emittedSamples()
        XCTAssertEqual(out.count, 4 * 48000)
        let before = level(out, 0.2, 0.9), during = level(out, 1.1, 1.9), after = level(out, 2.5, 3.9)
        XCTAssertEqual(before, -15, accuracy: 0.2, "a -12 dBFS peak sine is -15 dBFS RMS")
        XCTAssertLessThanOrEqual(during, before - 15 + 0.1, "before \(before), during \(during)")
        XCTAssertEqual(after, before, accuracy: 0.1, "recovered after hold + release")
        // The envelope: down within the attack, up within hold + release.
        XCTAssertLessThan(level(out, 1.03, 1.06), before - 14)
        XCTAssertLessThan(level(out, 2.02, 2.09), before - 14.5, "hold keeps it down")
        XCTAssertGreaterThan(level(out, 2.2, 2.3), before - 10, "release under way")
        XCTAssertEqual(level(out, 2.42, 2.5), before, accuracy: 0.2, "back after hold (100ms) + release (300ms)")
        XCTAssertEqual(h.events(named: "ducking").map { $0["on"]?.bool }, [true, false])
    }

    func testAQuietKeyBelowTheThresholdLeavesMainAlone() throws {
        let h = try harness("threshold: -30")
        try h.feed(TestMedia.toneBlocks(freq: 880, dBFS: -40, seconds: 2), input: 1)
        try h.feed(TestMedia.toneBlocks(freq: 440, dBFS: -6, seconds: 2), input: 0)
        try h.endAll()
        let out = try h.emittedSamples()
        XCTAssertEqual(level(out, 0, 2), -9, accuracy: 0.1)
    }

    func testLiveDepthChangeAppliesFromTheNextBlock() throws {
        let h = try harness("depth: 6, attack: 0s, release: 0s, hold: 0s", realtime: true)
        let app = try TestMedia.toneBlocks(freq: 440, dBFS: -12, seconds: 2)
        let mic = try TestMedia.toneBlocks(freq: 880, dBFS: -10, seconds: 2)
        // Live, main never waits: the latest key state applies.
        for i in 0..<app.count {
            try h.feed(mic[i], input: 1)
            if i == app.count / 2 { try h.set("depth", .number(20)) }
            try h.feed(app[i], input: 0)
        }
        XCTAssertEqual(h.events(named: "applied").map { $0["value"]?.double }, [20])
        XCTAssertThrowsError(try h.set("depth", .number(200)), "out of range")
        XCTAssertThrowsError(try h.set("nonsense", .number(1)))
        let out = try h.emittedSamples()
        XCTAssertEqual(level(out, 0.2, 0.9), -15 - 6, accuracy: 0.2)
        XCTAssertEqual(level(out, 1.2, 1.9), -15 - 20, accuracy: 0.2)
    }

    func testKeepsMainsFormat() throws {
        let s16 = StreamFormat.audio(sampleRate: 44100, channels: 2, sampleFormat: "s16")
        let h = try NodeHarness(type, inputs: [s16, mono], inputNames: ["app", "mic"], pads: ["main", "key"])
        XCTAssertEqual(h.outputFormats, [s16])
        XCTAssertThrowsError(try NodeHarness(type, inputs: [mono], inputNames: ["app"], pads: ["main"]), "key is required")
    }
}
