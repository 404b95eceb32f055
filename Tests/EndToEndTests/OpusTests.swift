import Foundation
import XCTest

/// The opus encoder through `avgraph run` into real files, judged by what FFmpeg reads back.
final class OpusTests: XCTestCase {
    /// -12 dBFS, the tone's default peak level.
    let toneLevel = 0.251

    struct Measured {
        var codec: String, rate: Int, channels: Int, duration: Double, packets: Int, packetDurations: Set<String>
    }

    func measure(_ path: String) throws -> Measured {
        let probe = try CLI.probe(path)
        let a = try XCTUnwrap(CLI.stream(probe, "audio"), "no audio stream in \(path)")
        let format = probe["format"] as? [String: Any] ?? [:]
        let packets = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries", "packet=duration_time",
                                     "-of", "csv=p=0", path]).split(separator: "\n").map(String.init)
        return Measured(codec: a["codec_name"] as? String ?? "", rate: Int(a["sample_rate"] as? String ?? "") ?? 0,
                        channels: a["channels"] as? Int ?? 0, duration: Double(format["duration"] as? String ?? "") ?? 0,
                        // The last packet may be short (the end of the input); side data follows a comma.
                        packets: packets.count, packetDurations: Set(packets.dropLast().map { String($0.prefix { $0 != "," }) }))
    }

    func dB(_ x: Double) -> Double { 20 * log10(x) }

    func rms(_ x: ArraySlice<Float>) -> Double { sqrt(x.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(x.count, 1))) }

    func run(_ pipe: String, in dir: String, file: StaticString = #filePath, line: UInt = #line) throws {
        CLI.write(pipe, to: dir + "/opus.pipe")
        let r = try CLI.run(["run", dir + "/opus.pipe"])
        XCTAssertEqual(r.status, 0, r.stderr, file: file, line: line)
    }

    /// What FFmpeg reads back from `path`: Opus at 48 kHz, `channels`, `seconds` long, in packets
    /// of `frame` seconds, the tone at `freq` at the level it went in.
    func assertTone(_ path: String, channels: Int, seconds: Double, frame: Double, freq: Double,
                    file: StaticString = #filePath, line: UInt = #line) throws {
        let m = try measure(path)
        XCTAssertEqual(m.codec, "opus", file: file, line: line)
        XCTAssertEqual(m.rate, 48000, file: file, line: line)
        XCTAssertEqual(m.channels, channels, file: file, line: line)
        XCTAssertEqual(m.duration, seconds, accuracy: 0.03, file: file, line: line)
        XCTAssertEqual(Double(m.packets), m.duration / frame, accuracy: 1, file: file, line: line)
        XCTAssertEqual(m.packetDurations, [String(format: "%.6f", frame)], file: file, line: line)
        let x = try CLI.samples(path, rate: 48000)
        XCTAssertEqual(Double(x.count) / 48000, seconds, accuracy: 0.03, "decoded length", file: file, line: line)
        // The middle, away from the encoder's start and end.
        let w = x[24000..<Int((seconds - 0.5) * 48000)]
        let k = CLI.component(w, freq: freq, rate: 48000, startIndex: 24000).amplitude
        XCTAssertEqual(dB(k), dB(toneLevel), accuracy: 1, "\(freq) Hz component (a drifted pitch would not add up)", file: file, line: line)
        XCTAssertEqual(dB(rms(w)), dB(toneLevel / sqrt(2)), accuracy: 1, "RMS", file: file, line: line)
        print("opus \((path as NSString).lastPathComponent): \(m.duration) s, \(m.packets) packets, decoded \(x.count) samples, "
              + "\(freq) Hz at \(dB(k)) dBFS (in: \(dB(toneLevel))), RMS \(dB(rms(w))) dBFS")
    }

    /// Runs `tone → opus → file` and returns the file's path.
    func encode(tone: String, opus: String, to name: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let dir = CLI.scratch(name)
        try run("""
        nodes:
          t:   {type: tone, \(tone)}
          enc: {type: opus, in: t, \(opus)}
          out: {type: file, in: [enc], path: \(name)}
        """, in: dir, file: file, line: line)
        return dir + "/" + name
    }

    /// Stereo 48 kHz in, Matroska out, default 20 ms frames.
    func testStereoToneKeepsDurationLevelAndTwentyMillisecondPackets() throws {
        let path = try encode(tone: "freq: 1000, rate: 48000, channels: 2, duration: 3s", opus: "bitrate: 128k", to: "stereo.mkv")
        try assertTone(path, channels: 2, seconds: 3, frame: 0.02, freq: 1000)
    }

    /// Mono 44.1 kHz in, MP4 out with 10 ms frames: resampled to 48 kHz, no drift in length or pitch.
    func testMono44100IsResampledTo48kHz() throws {
        let path = try encode(tone: "freq: 440, rate: 44100, channels: 1, duration: 2s", opus: "bitrate: 64k, frame: 10ms, application: audio",
                              to: "mono44k.mp4")
        try assertTone(path, channels: 1, seconds: 2, frame: 0.01, freq: 440)
    }

    /// A span with no input at all becomes silence of its length: the tone after it stays where it was.
    func testGapBecomesSilenceAndKeepsTheTimeline() throws {
        let path = try encode(tone: "freq: 1000, rate: 48000, channels: 1, duration: 3s, gaps: [{at: 1s, for: 1s}]",
                              opus: "application: voip", to: "gap.mkv")
        let m = try measure(path)
        XCTAssertEqual(m.duration, 3, accuracy: 0.03)
        XCTAssertEqual(Double(m.packets), m.duration / 0.02, accuracy: 1)
        let x = try CLI.samples(path, rate: 48000)
        let before = x[19200..<43200], gap = x[57600..<86400], after = x[105600..<129600]
        XCTAssertEqual(dB(rms(before)), dB(toneLevel / sqrt(2)), accuracy: 1)
        XCTAssertLessThan(dB(rms(gap)), -60, "the gap is silence")
        XCTAssertEqual(dB(rms(after)), dB(toneLevel / sqrt(2)), accuracy: 1)
        // The tone's phase follows absolute sample time: after the gap it is where an unbroken tone would be.
        let p1 = CLI.component(before, freq: 1000, rate: 48000, startIndex: 19200).phase
        let p2 = CLI.component(after, freq: 1000, rate: 48000, startIndex: 105600).phase
        var d = abs(p1 - p2).truncatingRemainder(dividingBy: 2 * .pi)
        if d > .pi { d = 2 * .pi - d }
        XCTAssertLessThan(d, 0.3, "the tone after the gap moved in time")
        print("opus gap: duration \(m.duration) s, \(m.packets) packets, gap RMS \(dB(rms(gap))) dBFS, phase step \(d) rad")
    }

    /// What the node cannot do is refused before anything runs, naming the node and why.
    func testRefusesSurroundMonoAboveCeilingAndMov() throws {
        let dir = CLI.scratch()
        func check(_ pipe: String) throws -> String {
            CLI.write(pipe, to: dir + "/bad.pipe")
            let r = try CLI.run(["check", dir + "/bad.pipe"])
            XCTAssertNotEqual(r.status, 0, "accepted:\n\(pipe)")
            return r.stdout + r.stderr
        }
        let surround = try check("""
        nodes:
          t:   {type: tone, channels: 6, duration: 1s}
          enc: {type: opus, in: t}
          out: {type: file, in: [enc], path: out.mkv}
        """)
        XCTAssertTrue(surround.contains("enc"), surround)
        XCTAssertTrue(surround.contains("opus encodes 1 or 2 channels, the input has 6"), surround)
        let mono = try check("""
        nodes:
          t:   {type: tone, channels: 1, duration: 1s}
          enc: {type: opus, in: t, bitrate: 300k}
          out: {type: file, in: [enc], path: out.mkv}
        """)
        XCTAssertTrue(mono.contains("at most 256k a channel"), mono)
        let mov = try check("""
        nodes:
          t:   {type: tone, duration: 1s}
          enc: {type: opus, in: t}
          out: {type: file, in: [enc], path: out.mov}
        """)
        XCTAssertTrue(mov.contains("a .mov file cannot hold opus"), mov)
        XCTAssertFalse(mov.contains(".flv"), "flv cannot hold opus either: \(mov)")
        XCTAssertTrue(mov.contains(".mp4") && mov.contains(".mkv"), mov)
    }
}
