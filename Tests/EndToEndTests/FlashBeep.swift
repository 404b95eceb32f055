import Foundation
import XCTest

/// A/V sync as a viewer sees it: a clip with a white flash and a 3 kHz beep at the same
/// instants (k + 0.5 s), and a measurer that decodes a recording, finds every flash (a jump in
/// mean luma) and every beep onset (a 3 kHz envelope), and pairs them.
enum FlashBeep {
    static let beepHz = 3000.0

    /// Portrait (a phone's screen) 30 fps black video, one white frame at every k + 0.5 s, and
    /// a 50 ms beep (amplitude 0.4) starting at the same instants; AAC 128k.
    /// `busy`: moving test pictures (testsrc2) behind the flashes, which an encoder needs bits for.
    static func makeClip(_ path: String, seconds: Int, size: String = "720x1280", busy: Bool = false) throws {
        let beep = "if(between(mod(t\\,1)\\,0.5\\,0.55)\\,0.4*sin(2*PI*\(Int(beepHz))*t)\\,0)"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y",
                           "-f", "lavfi", "-i", "\(busy ? "testsrc2=s=\(size):r=30:d=\(seconds)" : "color=c=black:s=\(size):r=30:d=\(seconds)"),drawbox=x=0:y=0:w=iw:h=ih:c=white:t=fill:enable='eq(mod(n\\,30)\\,15)'",
                           "-f", "lavfi", "-i", "aevalsrc='\(beep)|\(beep)':s=48000:d=\(seconds)",
                           "-c:v", "libx264", "-preset", "ultrafast", "-g", "30", "-pix_fmt", "yuv420p",
                           "-c:a", "aac", "-b:a", "128k", "-shortest", path])
        guard FileManager.default.fileExists(atPath: path) else { throw NSError(domain: "flashbeep: ffmpeg made no clip", code: 1) }
    }

    struct Measurement {
        var videoTimes: [Double]
        var flashes: [Double]
        var beeps: [Double]
        var audioStart: Double
        /// Largest |sample| over every channel.
        var peak: Float
        /// Flash minus nearest beep (seconds), per flash that has a beep within 0.4 s.
        var offsets: [Double]
        /// Flashes with no beep within 0.4 s.
        var lonelyFlashes: [Double]
    }

    static func measure(_ path: String) throws -> Measurement {
        let times = try CLI.videoFrameTimes(path)
        let w = 32, h = 18
        let raw = try CLI.capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                                   "-vf", "scale=\(w):\(h),format=gray", "-f", "rawvideo", "-"])
        let luma: [Double] = stride(from: 0, to: raw.count - w * h + 1, by: w * h).map { o in
            Double(raw[o..<o + w * h].reduce(0) { $0 + Int($1) }) / Double(w * h)
        }
        var flashes: [Double] = []
        for i in 1..<max(1, min(times.count, luma.count)) where luma[i] - luma[i - 1] > 40 { flashes.append(times[i]) }

        let first = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "a:0", "-read_intervals", "%+2",
                                   "-show_entries", "frame=pts_time", "-of", "csv=p=0", path])
        let audioStart = first.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .punctuationCharacters)) }.first ?? .nan
        let data = try CLI.capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:a:0", "-ar", "48000", "-f", "f32le", "-"])
        let all: [Float] = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let channels = 2
        let peak = all.reduce(Float(0)) { max($0, abs($1)) }
        let mono = stride(from: 0, to: all.count - channels + 1, by: channels).map { all[$0] }
        let beeps = onsets(mono, rate: 48000).map { audioStart + $0 }

        var offsets: [Double] = [], lonely: [Double] = []
        for f in flashes {
            if let b = beeps.min(by: { abs($0 - f) < abs($1 - f) }), abs(b - f) < 0.4 { offsets.append(f - b) } else { lonely.append(f) }
        }
        return Measurement(videoTimes: times, flashes: flashes, beeps: beeps, audioStart: audioStart, peak: peak,
                           offsets: offsets, lonelyFlashes: lonely)
    }

    /// Seconds (from the first sample) where the beep's 3 kHz envelope, over a trailing 1 ms
    /// window, first rises past 0.1 after at least half a second without it.
    static func onsets(_ x: [Float], rate: Int) -> [Double] {
        let window = rate / 1000
        let step = 2 * Double.pi * beepHz / Double(rate)
        var re = [Double](repeating: 0, count: x.count + 1), im = re
        for (i, v) in x.enumerated() {
            re[i + 1] = re[i] + Double(v) * cos(step * Double(i))
            im[i + 1] = im[i] - Double(v) * sin(step * Double(i))
        }
        var found: [Double] = []
        var last = -Int.max / 2
        var i = window
        while i <= x.count {
            let a = 2 * hypot(re[i] - re[i - window], im[i] - im[i - window]) / Double(window)
            if a > 0.1 {
                // A linear rise over the window crosses a quarter of 0.4 a quarter window in.
                if i - last > rate / 2 { found.append(Double(i - window + window / 4) / Double(rate)) }
                last = i
            }
            i += 1
        }
        return found
    }

    /// The run's median flash minus beep (signed) and its largest |flash minus beep|, seconds.
    static func figures(_ m: Measurement) -> (median: Double, worst: Double) {
        let sorted = m.offsets.sorted()
        return (sorted.isEmpty ? .nan : sorted[sorted.count / 2], m.offsets.map(abs).max() ?? .nan)
    }

    /// A run in sync as a whole: its median flash minus beep within `median` and every flash within
    /// `worst` (assertInSync). A constant offset of one frame (33 ms at 30 fps) with a few
    /// milliseconds of scatter can keep many flashes inside a per-flash window; the median of the
    /// run cannot hide it.
    static func assertRunInSync(_ m: Measurement, atLeast count: Int, median: Double = 0.005, worst: Double = 0.020,
                                _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let f = figures(m)
        XCTAssertLessThanOrEqual(abs(f.median), median, "\(what): median flash minus beep \(ms(f.median)) ms",
                                 file: file, line: line)
        assertInSync(m, atLeast: count, tolerance: worst, file: file, line: line)
    }

    static func ms(_ seconds: Double) -> String { String(format: "%.1f", seconds * 1000) }

    /// Every flash within `tolerance` of its beep, and enough of them seen.
    static func assertInSync(_ m: Measurement, atLeast count: Int, tolerance: Double = 0.020,
                             file: StaticString = #filePath, line: UInt = #line) {
        let ms = m.offsets.map { Int(($0 * 1000).rounded()) }
        XCTAssertGreaterThanOrEqual(m.offsets.count, count, "flashes paired with a beep: \(ms) (flashes \(m.flashes), beeps \(m.beeps))",
                                    file: file, line: line)
        XCTAssertTrue(m.lonelyFlashes.isEmpty, "flashes without a beep: \(m.lonelyFlashes)", file: file, line: line)
        let worst = m.offsets.map(abs).max() ?? 1
        XCTAssertLessThanOrEqual(worst, tolerance, "flash minus beep, ms: \(ms)", file: file, line: line)
    }
}
