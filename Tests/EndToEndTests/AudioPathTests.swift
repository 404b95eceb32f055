import Foundation
import XCTest

final class AudioPathTests: XCTestCase {
    /// A mic that starts at 3 s: absent before, present after, and the app tone goes on
    /// without a click or a shift at the join.
    func testLateMicJoinsWithoutShiftingTheAppTone() throws {
        let dir = CLI.scratch()
        CLI.write("""
        duration: 6s
        nodes:
          app:   {type: tone, freq: 440, rate: 44100, channels: 2}
          mic:   {type: tone, freq: 880, rate: 48000, start: 3s}
          mix:   {type: mixer, in: [app, mic], rate: 44100}
          audio: {type: aac, in: mix, bitrate: 192k}
          out:   {type: file, in: [audio], path: out.mp4}
        """, to: dir + "/mix.pipe")
        let r = try CLI.run(["run", dir + "/mix.pipe"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let x = try CLI.samples(dir + "/out.mp4")
        XCTAssertEqual(Double(x.count) / 44100, 6, accuracy: 0.05)
        let rate = 44100
        func window(_ t: Double, _ len: Double = 0.2) -> (ArraySlice<Float>, Int) {
            let s = Int(t * Double(rate))
            return (x[s..<min(x.count, s + Int(len * Double(rate)))], s)
        }
        let appLevel = 0.251  // -12 dBFS
        for t in [0.5, 1.5, 2.6] {
            let (w, s) = window(t)
            XCTAssertLessThan(CLI.component(w, freq: 880, rate: rate, startIndex: s).amplitude, 0.01, "mic audible at \(t)s")
            XCTAssertEqual(CLI.component(w, freq: 440, rate: rate, startIndex: s).amplitude, appLevel, accuracy: 0.05, "app at \(t)s")
        }
        for t in [3.3, 4.5, 5.5] {
            let (w, s) = window(t)
            XCTAssertGreaterThan(CLI.component(w, freq: 880, rate: rate, startIndex: s).amplitude, 0.1, "mic missing at \(t)s")
            XCTAssertEqual(CLI.component(w, freq: 440, rate: rate, startIndex: s).amplitude, appLevel, accuracy: 0.05, "app at \(t)s")
        }
        // Phase of the app tone against absolute sample time: the same before and after the join.
        let before = window(2.7), after = window(3.2)
        let p1 = CLI.component(before.0, freq: 440, rate: rate, startIndex: before.1).phase
        let p2 = CLI.component(after.0, freq: 440, rate: rate, startIndex: after.1).phase
        var d = abs(p1 - p2).truncatingRemainder(dividingBy: 2 * .pi)
        if d > .pi { d = 2 * .pi - d }
        XCTAssertLessThan(d, 0.2, "app tone phase jumped at the join")
    }

    func testBigEndianToneComesOutAsTheTone() throws {
        let dir = CLI.scratch()
        CLI.write("""
        duration: 2s
        nodes:
          app:   {type: tone, freq: 1000, rate: 44100, channels: 2, format: s16be}
          mix:   {type: mixer, in: [app], rate: 44100}
          audio: {type: aac, in: mix}
          out:   {type: file, in: [audio], path: out.mp4}
        """, to: dir + "/be.pipe")
        let r = try CLI.run(["run", dir + "/be.pipe"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let x = try CLI.samples(dir + "/out.mp4")
        let w = x[22050..<66150]
        let rms = sqrt(w.reduce(0.0) { $0 + Double($1 * $1) } / Double(w.count))
        let k = CLI.component(w, freq: 1000, rate: 44100, startIndex: 22050).amplitude
        XCTAssertGreaterThan(k, 0.2)
        // Nearly all the energy is in the 1 kHz sine: amplitude/sqrt(2) ~ rms.
        XCTAssertEqual(k / sqrt(2), rms, accuracy: rms * 0.1)
    }
}
