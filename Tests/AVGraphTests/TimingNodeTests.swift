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

    /// Live: after a 1 s stall the graph runs 0.4 s behind (before it, 0.01 s): repeats have
    /// covered the slots the first frames after it are stamped for. Those are passed over (the
    /// repeats stood in for them); every frame that shows, shows on its own slot, so the picture
    /// stays with its sound. Moving them to the next free slot would keep every later picture
    /// that much late for the rest of the run. The stream is not frozen either: from the first
    /// frame whose slot is free on, every frame shows.
    func testLiveFpsPutsFramesThatComeBackLaterThanTheRepeatsOnTheirOwnSlots() throws {
        let src = try NodeHarness.frames(from: XCTUnwrap(TestSupport.registry["testsrc"]), options: "size: 64x64, rate: 30, duration: 4s")
        let h = try NodeHarness(XCTUnwrap(TestSupport.registry["fps"]), options: "rate: 30", inputs: [src.format], realtime: true)
        for f in src.frames[0..<30] {
            try h.tick(at: f.seconds + 0.01)
            try h.feed(f.ref())
        }
        for k in 0..<50 { try h.tick(at: 1.0 + Double(k) * 0.02) }
        for f in src.frames[60..<120] {
            try h.tick(at: f.seconds + 0.4)
            try h.feed(f.ref())
        }
        let out = h.emittedFrames()
        let index = Dictionary(src.frames.enumerated().map { ($1.plane(0), $0) }, uniquingKeysWith: { a, _ in a })
        let shown = out.compactMap { f in index[f.plane(0)].map { (slot: f.pts, frame: $0) } }
        let resumed = shown.filter { $0.frame >= 60 }
        let trace = "\(out.map { "\($0.pts):\(index[$0.plane(0)] ?? -1)" })"
        for s in resumed { XCTAssertEqual(s.slot, Int64(s.frame), "frame \(s.frame) off its slot: \(trace)") }
        let firstResumed = resumed.first?.frame ?? 120
        XCTAssertLessThanOrEqual(firstResumed, 72, "passed over more than the repeats covered: \(trace)")
        XCTAssertEqual(Set(resumed.map(\.frame)), Set(firstResumed..<120), "not every frame after the first on time shows: \(trace)")
        XCTAssertEqual(out.last?.plane(0), src.frames[119].plane(0), "the stream ends on the last frame, not on a repeat")
        XCTAssertEqual(out.map(\.pts), Array(0..<Int64(out.count)), "one stream, no hole, no slot twice")
    }

    func testFpsHoldStillBoundsTheRepeatsWhenSet() throws {
        let src = try NodeHarness.frames(from: XCTUnwrap(TestSupport.registry["testsrc"]),
                                         options: "size: 64x64, rate: 30, duration: 4s, stalls: [{at: 1s, for: 2s}]")
        let h = try NodeHarness(XCTUnwrap(TestSupport.registry["fps"]), options: "rate: 30, hold: 1s", inputs: [src.format])
        try h.feedByTime([src.frames])
        XCTAssertEqual(h.emittedFrames().map(\.pts), Array(0..<60) + Array(90..<120))
    }

    /// The `app` path, as a capture callback drives it: a producer on its own clock (5000.0123 s
    /// at its start), coming 0.7 s after the run, audio 40 ms ahead of the first picture in 10 ms
    /// blocks, flashes and 3 kHz beeps together at k + 0.5 s. Measured on the raw output of `fps`
    /// and the mixer: every flash at its beep (to a sample and a slot), the first picture at ~0.
    func testAppPathFromALateProducerOnItsOwnClockKeepsFlashesOnTheirBeeps() throws {
        let dir = TestSupport.scratch()
        // (`collect` keeps every picture: a resize in front returns the ingest's pooled buffers.)
        try """
        nodes:
          phone: {type: app, size: 64x64, rate: 30, buffer: 16}
          copy:  {type: resize, in: phone.video, size: 32x32}
          cfr:   {type: fps, in: copy, rate: 30}
          v:     {type: collect, in: cfr}
          mix:   {type: mixer, in: [phone.audio, phone.mic], rate: 48000}
          a:     {type: collect, in: mix}
        """.write(toFile: dir + "/app.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/app.pipe", registry: AudioNodeTests.registry())
        live.start()
        let phone = try XCTUnwrap(live.appSource(named: "phone"))
        usleep(700_000)
        let base = 5000.0123, rate = 48000, seconds = 3.0
        var y = [UInt8](repeating: 16, count: 64 * 64)
        let uv = [UInt8](repeating: 128, count: 64 * 32)
        var pcm = [Int16](repeating: 0, count: 960)
        var audioAt = -0.04, frame = 0
        let start = Date()
        while Double(frame) / 30 < seconds {
            let video = Double(frame) / 30
            let (isVideo, p) = video <= audioAt ? (true, video) : (false, audioAt)
            let wait = p + 0.04 - Date().timeIntervalSince(start)
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
            if isVideo {
                let flash = frame % 30 == 15
                for i in y.indices { y[i] = flash ? 235 : 16 }
                let r = y.withUnsafeBytes { yb in uv.withUnsafeBytes { ub in
                    phone.pushNV12(width: 64, height: 64, y: yb.baseAddress!, yStride: 64, uv: ub.baseAddress!, uvStride: 64, time: base + p) } }
                XCTAssertEqual(r, .taken)
                frame += 1
            } else {
                for k in 0..<480 {
                    let t = p + Double(k) / Double(rate)
                    let beep = (0.5..<0.55).contains(t - t.rounded(.down)) ? 0.4 * sin(2 * .pi * 3000 * t) : 0
                    pcm[2 * k] = Int16(beep * 32767); pcm[2 * k + 1] = pcm[2 * k]
                }
                XCTAssertEqual(pcm.withUnsafeBytes { phone.pushAudio($0, rate: rate, channels: 2, time: base + p) }, .taken)
                audioAt += 0.01
            }
        }
        phone.finish()
        try live.wait()

        let pictures = AudioCollectSink.store.get("v").compactMap(\.frame)
        XCTAssertLessThanOrEqual(Double(pictures.first?.pts ?? 99) / 30, 0.1, "the first picture starts the recording")
        var flashes: [Double] = []
        var wasBright = false
        for f in pictures {
            let bright = f.plane(0)![16 * f.lineSize(0) + 16] > 128
            if bright && !wasBright { flashes.append(Double(f.pts) / 30) }
            wasBright = bright
        }
        var beeps: [Double] = []
        var lastLoud = Int64.min / 2
        for f in AudioCollectSink.store.get("a").compactMap(\.frame) {
            let x = f.audioData(0).assumingMemoryBound(to: Float.self)
            for i in 0..<f.sampleCount where abs(x[i]) > 0.1 {
                let n = f.pts + Int64(i)
                if n - lastLoud > Int64(rate / 2) { beeps.append(Double(n) / Double(rate)) }
                lastLoud = n
            }
        }
        XCTAssertEqual(flashes.count, 3, "flashes \(flashes)")
        XCTAssertEqual(beeps.count, 3, "beeps \(beeps)")
        for (f, b) in zip(flashes, beeps) {
            // The beep's first loud sample is within a few samples of its start.
            XCTAssertEqual(f, b, accuracy: 0.002, "flash \(f) s, beep \(b) s")
        }
    }
}
