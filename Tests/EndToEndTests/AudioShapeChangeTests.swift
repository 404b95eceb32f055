import AVGraphTesting
import Foundation
import XCTest

/// App audio that changes its rate and channel count mid-session (ReplayKit's app audio does):
/// 44.1 kHz stereo, then 48 kHz mono, then 44.1 kHz stereo again, pushed over the socket framing
/// by a producer written here from docs/INGEST.md. The recording's audio goes through each change
/// without a hole or a click (no sample-to-sample step beyond what the tone allows), and the
/// flashes stay on their beeps after it.
final class AudioShapeChangeTests: XCTestCase {
    /// 6 s of 360x640 yuv420p pictures (white at k + 0.5 s) and s16 audio in 1024-sample blocks:
    /// a 440 Hz tone (0.25) with a 3 kHz beep (0.4) over k + 0.5 ... k + 0.55 s, one continuous
    /// signal whatever the block's rate and channels; paced in real time.
    static let producer = #"""
    import math, socket, struct, sys, time
    path = sys.argv[1]
    shapes = [(0.0, 44100, 2), (2.0, 48000, 1), (4.0, 44100, 2)]
    end = 6.0
    W, H = 360, 640
    def header(kind, ts, size, a, b, fmt, orient):
        return b"AVGI" + struct.pack("<BBHqIIIBBH", 1, kind, 0, ts, size, a, b, fmt, orient, 0)
    def picture(white):
        y = bytes([235 if white else 16]) * (W * H)
        return y + bytes([128]) * (W * H // 2)
    pictures = [picture(False), picture(True)]
    def signal(t):
        v = 0.25 * math.sin(2 * math.pi * 440 * t)
        if 0.5 <= t % 1 < 0.55: v += 0.4 * math.sin(2 * math.pi * 3000 * t)
        return v
    events = [(n / 30, "v", n) for n in range(int(end * 30))]
    for i, (start, rate, ch) in enumerate(shapes):
        stop = shapes[i + 1][0] if i + 1 < len(shapes) else end
        first, last = round(start * rate), round(stop * rate)
        s = first
        while s < last:
            n = min(1024, last - s)
            events.append((s / rate, "a", (s, n, rate, ch)))
            s += n
    events.sort(key=lambda e: e[0])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    t0 = time.monotonic()
    for t, kind, what in events:
        wait = t0 + t - time.monotonic()
        if wait > 0: time.sleep(wait)
        if kind == "v":
            body = pictures[1 if what % 30 == 15 else 0]
            sock.sendall(header(1, round(t * 1e6), len(body), W, H, 3, 1) + body)
        else:
            s, n, rate, ch = what
            samples = []
            for k in range(n):
                x = int(round(32767 * signal((s + k) / rate)))
                samples += [x] * ch
            body = struct.pack("<%dh" % len(samples), *samples)
            sock.sendall(header(2, round(s / rate * 1e6), len(body), rate, ch, 1, 0) + body)
    sock.sendall(header(4, round(end * 1e6), 0, 0, 0, 0, 0))
    sock.close()
    """#

    func testAppAudioGoingFrom44kStereoTo48kMonoAndBackHasNoHoleNoClickAndKeepsSync() throws {
        let dir = CLI.scratch()
        let socket = "/tmp/avg-shape-\(UUID().uuidString.prefix(8)).sock"
        CLI.write("""
        pipeline: shapes
        nodes:
          phone:  {type: socket, path: \(socket), size: 360x640}
          fit:    {type: resize, in: phone.video, size: 640x360, mode: fit}
          smooth: {type: fps, in: fit, rate: 30}
          mix:    {type: mixer, in: [phone.app], rate: 48000}
          video:  {type: h264, in: smooth, bitrate: 1M, preset: ultrafast}
          audio:  {type: aac, in: mix, bitrate: 192k}
          out:    {type: file, in: [video, audio], path: out.mp4, overwrite: true}
        """, to: dir + "/shapes.pipe")
        CLI.write(Self.producer, to: dir + "/producer.py")
        let run = try BackgroundRun(["run", dir + "/shapes.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, "the socket source did not listen: \(run.stderr)")
        let producer = try PublisherVanishTests.spawn("python3", [dir + "/producer.py", socket])
        defer { if producer.isRunning { producer.terminate() } }
        producer.waitUntilExit()
        XCTAssertEqual(producer.terminationStatus, 0, "the producer ran")
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)

        let path = dir + "/out.mp4"
        let m = try FlashBeep.measure(path)
        FlashBeep.assertInSync(m, atLeast: 5)
        let audio = try CLI.samples(path, rate: 48000)
        // The changes are at 2 s and 4 s of the producer's time; the recording starts at its
        // first media, within a frame of that. Around each, only the tone sounds (the beeps are
        // at k + 0.5 s): a step between two samples beyond the tone's own steepest (2 pi 440 x
        // 0.25 / 48000 = 0.0144), with room for AAC's noise, is a click; a window quieter than
        // the tone is a hole.
        let steepest = 2 * Double.pi * 440 * 0.25 / 48000
        for change in [2.0, 4.0] {
            let lo = Int((change - 0.3) * 48000), hi = min(audio.count, Int((change + 0.3) * 48000))
            XCTAssertGreaterThan(hi - lo, 48000 / 2, "audio around \(change) s")
            guard hi - lo > 48000 / 2 else { continue }
            let steps = (lo + 1..<hi).map { abs(Double(audio[$0] - audio[$0 - 1])) }
            let quietest = stride(from: lo, to: hi - 240, by: 240).map { s in
                sqrt(audio[s..<s + 240].reduce(0) { $0 + Double($1) * Double($1) } / 240)
            }.min() ?? 0
            print("change at \(change) s: largest step \(String(format: "%.4f", steps.max() ?? 0)) (the tone's \(String(format: "%.4f", steepest))), "
                  + "quietest 5 ms RMS \(String(format: "%.3f", quietest)) (the tone's 0.177)")
            XCTAssertLessThan(steps.max() ?? 1, steepest * 1.5 + 0.01, "no click at the change at \(change) s")
            XCTAssertGreaterThan(quietest, 0.12, "no hole at the change at \(change) s")
        }
        print("flash - beep, ms: \(m.offsets.map { Int(($0 * 1000).rounded()) })")
    }
}
