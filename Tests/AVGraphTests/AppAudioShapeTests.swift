import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// The in-process `app` source given app audio that changes rate and channels mid-session (as
/// ReplayKit's does): 44.1 kHz stereo, 48 kHz mono, 44.1 kHz stereo, one continuous 440 Hz
/// tone pushed through `AppSource.pushAudio` in real time. The recording's audio has no click
/// and no hole at either change.
final class AppAudioShapeTests: XCTestCase {
    func testAppAudioThatChangesRateAndChannelsHasNoClickAndNoHole() throws {
        let dir = TestSupport.scratch()
        try """
        pipeline: appshape
        nodes:
          phone:  {type: app, size: 64x64}
          fit:    {type: resize, in: phone.video, size: 64x64, quality: fast}
          smooth: {type: fps, in: fit, rate: 30}
          mix:    {type: mixer, in: [phone.audio], rate: 48000}
          video:  {type: h264, in: smooth, preset: ultrafast}
          audio:  {type: aac, in: mix, bitrate: 192k}
          out:    {type: file, in: [video, audio], path: out.mp4, overwrite: true}
        """.write(toFile: dir + "/app.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/app.pipe", registry: TestSupport.registry)
        live.start()
        let source = try XCTUnwrap(live.appSource(named: "phone"))
        let shapes: [(from: Double, rate: Int, channels: Int)] = [(0, 44100, 2), (2, 48000, 1), (4, 44100, 2)]
        let y = [UInt8](repeating: 60, count: 64 * 64), uv = [UInt8](repeating: 128, count: 64 * 32)
        var events: [(time: Double, block: (start: Int, count: Int, rate: Int, channels: Int)?)] = (0..<180).map { (Double($0) / 30, nil) }
        for (i, shape) in shapes.enumerated() {
            let end = i + 1 < shapes.count ? shapes[i + 1].from : 6
            var s = Int((shape.from * Double(shape.rate)).rounded())
            let last = Int((end * Double(shape.rate)).rounded())
            while s < last {
                let n = min(1024, last - s)
                events.append((Double(s) / Double(shape.rate), (s, n, shape.rate, shape.channels)))
                s += n
            }
        }
        events.sort { $0.time < $1.time }
        let start = Date()
        for event in events {
            let wait = event.time - Date().timeIntervalSince(start)
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
            guard let b = event.block else {
                _ = y.withUnsafeBytes { yp in uv.withUnsafeBytes { uvp in
                    source.pushNV12(width: 64, height: 64, y: yp.baseAddress!, yStride: 64, uv: uvp.baseAddress!, uvStride: 64,
                                    time: event.time, orientation: .up)
                } }
                continue
            }
            var pcm = [Int16](repeating: 0, count: b.count * b.channels)
            for k in 0..<b.count {
                let v = Int16((0.25 * 32767 * sin(2 * Double.pi * 440 * Double(b.start + k) / Double(b.rate))).rounded())
                for c in 0..<b.channels { pcm[k * b.channels + c] = v }
            }
            let r = pcm.withUnsafeBytes { source.pushAudio($0, format: .s16, rate: b.rate, channels: b.channels, time: event.time) }
            XCTAssertEqual(r, .taken)
        }
        source.finish()
        try live.wait()
        let audio = try TestSupport.decodeAudio(dir + "/out.mp4", rate: 48000, channel: 0)
        let steepest = 2 * Double.pi * 440 * 0.25 / 48000
        for change in [2.0, 4.0] {
            let lo = Int((change - 0.3) * 48000), hi = min(audio.count, Int((change + 0.3) * 48000))
            XCTAssertGreaterThan(hi - lo, 48000 / 2, "audio around \(change) s")
            guard hi - lo > 48000 / 2 else { continue }
            let largest = (lo + 1..<hi).map { abs(Double(audio[$0] - audio[$0 - 1])) }.max() ?? 1
            let quietest = stride(from: lo, to: hi - 240, by: 240).map { s in
                sqrt(audio[s..<s + 240].reduce(0) { $0 + Double($1) * Double($1) } / 240)
            }.min() ?? 0
            print("app source, change at \(change) s: largest step \(String(format: "%.4f", largest)) (the tone's \(String(format: "%.4f", steepest))), "
                  + "quietest 5 ms RMS \(String(format: "%.3f", quietest)) (the tone's 0.177)")
            XCTAssertLessThan(largest, steepest * 1.5 + 0.01, "no click at \(change) s")
            XCTAssertGreaterThan(quietest, 0.12, "no hole at \(change) s")
        }
    }
}
