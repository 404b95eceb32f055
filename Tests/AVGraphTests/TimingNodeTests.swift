import AVGraph
import AVGraphNodes
import AVGraphTesting
import CFFmpeg
import Foundation
import XCTest

/// The mixer's limiter on real samples, and `fps` through a stall with its default `hold`.
final class TimingNodeTests: XCTestCase {
    func mix(_ options: String, tones: [(name: String, options: String)]) throws -> (frames: [Frame], harness: NodeHarness) {
        let registry = TestSupport.registry
        let sources = try tones.map { try NodeHarness.frames(from: XCTUnwrap(registry["tone"]), options: $0.options) }
        let h = try NodeHarness(XCTUnwrap(registry["mixer"]), options: options, inputs: sources.map(\.format), inputNames: tones.map(\.name))
        try h.feedByTime(sources.map(\.frames))
        return (h.emittedFrames(), h)
    }

    /// Peak of the band-limited waveform (8x, windowed sinc over ±16 samples), as a decoder would
    /// reconstruct it: an estimate independent of the limiter's own.
    func truePeak(_ x: [Float], from a: Int, to b: Int) -> Double {
        var peak = 0.0
        for n in max(a, 16)..<min(b, x.count - 17) {
            for k in 0..<8 {
                let t = Double(k) / 8
                var v = 0.0
                for m in -15...16 {
                    let d = t - Double(m)
                    let sinc = d == 0 ? 1 : sin(.pi * d) / (.pi * d)
                    let w = 0.5 + 0.5 * cos(.pi * d / 17)
                    v += Double(x[n + m]) * sinc * w
                }
                peak = max(peak, abs(v))
            }
        }
        return peak
    }

    func samples(_ frames: [Frame], channel: Int) -> [Float] {
        frames.flatMap { f in Array(UnsafeBufferPointer(start: f.audioData(channel).assumingMemoryBound(to: Float.self), count: f.sampleCount)) }
    }

    func testLimiterHoldsAHardLoudOnsetUnderTheCeilingWithoutShiftingOrCrushingTheMix() throws {
        // Two -1 dBFS tones at +6 dB each: 3.5x full scale; the second one starts abruptly at 1 s.
        let (frames, _) = try mix("rate: 48000, channels: 2, gain: {a: 6dB, b: 6dB}", tones: [
            ("a", "freq: 1000, level: -1dB, channels: 2, duration: 2s"), ("b", "freq: 1500, level: -1dB, channels: 2, start: 1s, duration: 1s")])
        XCTAssertTrue(frames.dropLast().allSatisfy { $0.sampleCount == 1024 }, "blocks keep their size")
        var next = frames.first?.pts ?? -1
        XCTAssertEqual(next, 0, "the limiter's delay does not move the timeline")
        for f in frames { XCTAssertEqual(f.pts, next, "continuous"); next = f.pts + Int64(f.sampleCount) }
        XCTAssertEqual(next, 96000, "every sample comes out, the limiter's tail included")
        let ceiling = pow(10, -2.0 / 20)
        for c in 0..<2 {
            let x = samples(frames, channel: c)
            let samplePeak = Double(x.map(abs).max() ?? 9)
            XCTAssertLessThanOrEqual(samplePeak, ceiling + 1e-4, "sample peak")
            let onset = truePeak(x, from: 47000, to: 50000)
            XCTAssertLessThanOrEqual(onset, ceiling * 1.02, "true peak at the hard onset (1 s)")
            XCTAssertLessThanOrEqual(truePeak(x, from: 0, to: 96000), ceiling * 1.02, "true peak anywhere")
            // Held, not clipped: the 1 kHz tone keeps its shape (no 3rd harmonic) at the ceiling's level.
            let window = x[9600..<38400]
            XCTAssertEqual(TestSupport.toneLevel(window, freq: 1000, rate: 48000), ceiling, accuracy: 0.02, "1 kHz alone, limited to the ceiling")
            XCTAssertLessThan(TestSupport.toneLevel(window, freq: 3000, rate: 48000), 0.002, "no distortion from the limiter")
        }
    }

    func testLimiterLeavesAMixUnderTheCeilingUntouched() throws {
        let (frames, _) = try mix("channels: 1, gain: {a: 0.4, b: 0.4}", tones: [
            ("a", "freq: 440, level: -1dB, duration: 1s"), ("b", "freq: 660, level: -1dB, duration: 1s")])
        let x = samples(frames, channel: 0)
        XCTAssertEqual(x.count, 48000)
        let amplitude = pow(10, -1.0 / 20) * 0.4  // the sum peaks at -2.9 dBFS
        for n in stride(from: 0, to: 48000, by: 997) {
            let t = Double(n) / 48000
            let expected = amplitude * (sin(2 * .pi * 440 * t) + sin(2 * .pi * 660 * t))
            XCTAssertEqual(Double(x[n]), expected, accuracy: 1e-4, "sample \(n)")
        }
    }

    func testFpsRepeatsTheLastFrameThroughAStallOfAnyLengthByDefault() throws {
        let src = try NodeHarness.frames(from: XCTUnwrap(TestSupport.registry["testsrc"]),
                                         options: "size: 64x64, rate: 30, duration: 9s, stalls: [{at: 1s, for: 7s}]")
        let h = try NodeHarness(XCTUnwrap(TestSupport.registry["fps"]), options: "rate: 30", inputs: [src.format])
        try h.feedByTime([src.frames])
        let out = h.emittedFrames()
        XCTAssertEqual(out.map(\.pts), Array(0..<270), "a 7 s still screen leaves no hole")
        for f in out[30..<240] { XCTAssertEqual(f.plane(0), out[29].plane(0), "the repeats are the last picture, by reference") }
    }

    func testFpsHoldStillBoundsTheRepeatsWhenSet() throws {
        let src = try NodeHarness.frames(from: XCTUnwrap(TestSupport.registry["testsrc"]),
                                         options: "size: 64x64, rate: 30, duration: 4s, stalls: [{at: 1s, for: 2s}]")
        let h = try NodeHarness(XCTUnwrap(TestSupport.registry["fps"]), options: "rate: 30, hold: 1s", inputs: [src.format])
        try h.feedByTime([src.frames])
        XCTAssertEqual(h.emittedFrames().map(\.pts), Array(0..<60) + Array(90..<120))
    }
}
