// Pushes five seconds of generated screen pictures (NV12, a phone turned to landscape half-way),
// app audio and a microphone into a pipeline through the Swift API, the way a broadcast
// extension's `processSampleBuffer` would, and records them.
//
//     swift run -c release PushExample [OUTPUT.mp4]
import AVGraph
import AVGraphNodes
import Foundation

let output = CommandLine.arguments.dropFirst().first ?? FileManager.default.currentDirectoryPath + "/out/push-example.mp4"
let pipe = """
pipeline: push-example
nodes:
  phone:   {type: app, size: 720x1280}
  upright: {type: orient, in: phone.video}
  fit:     {type: resize, in: upright, size: 1280x720, mode: fit}
  smooth:  {type: fps, in: fit, rate: 30}
  mix:     {type: mixer, in: [phone.audio, phone.mic], rate: 48000}
  video:   {type: h264, in: smooth, bitrate: 2500k, queue: {size: 60}}
  audio:   {type: aac, in: mix, bitrate: 128k}
  out:     {type: file, in: [video, audio], path: \(output), overwrite: true}
"""
let file = NSTemporaryDirectory() + "push-example.pipe"
try pipe.write(toFile: file, atomically: true, encoding: .utf8)
try? FileManager.default.createDirectory(atPath: (output as NSString).deletingLastPathComponent, withIntermediateDirectories: true)

FFmpegLog.errorsOnly()
let live = try LivePipeline(path: file)
live.start()
guard let phone = live.appSource(named: "phone") else { fatalError("no app source named 'phone'") }

// A 720x1280 NV12 screen: a gray ramp that scrolls; the chroma plane stays neutral.
let (width, height) = (720, 1280)
var luma = [UInt8](repeating: 0, count: width * height)
let chroma = [UInt8](repeating: 128, count: width * height / 2)
var app = [Int16](repeating: 0, count: 1024 * 2)     // 440 Hz, stereo, s16
var mic = [Float](repeating: 0, count: 1024)         // 880 Hz, mono, f32, from 2 s on
var results: [PushResult: Int] = [:]
var slowest = 0.0

let start = Date()
var frame = 0, block = 0
while frame < 150 {
    let videoTime = Double(frame) / 30, audioTime = Double(block) * 1024 / 48000
    let next = min(videoTime, audioTime)
    let wait = next - Date().timeIntervalSince(start)
    if wait > 0 { usleep(UInt32(wait * 1e6)) }
    if videoTime <= audioTime {
        for y in 0..<height { memset(&luma[y * width], Int32(16 + (y + frame * 8) % 220), width) }
        // The phone is turned to landscape at 2.5 s: same portrait buffer, tag `left`.
        let t0 = Date()
        let r = luma.withUnsafeBytes { y in chroma.withUnsafeBytes { uv in
            phone.pushNV12(width: width, height: height, y: y.baseAddress!, yStride: width, uv: uv.baseAddress!, uvStride: width,
                           time: videoTime, orientation: videoTime < 2.5 ? .up : .left)
        } }
        slowest = max(slowest, Date().timeIntervalSince(t0))
        results[r, default: 0] += 1
        frame += 1
    } else {
        for i in 0..<1024 {
            let n = Double(block * 1024 + i)
            let s = Int16(8000 * sin(2 * .pi * 440 * n / 48000))
            app[2 * i] = s
            app[2 * i + 1] = s
            mic[i] = Float(0.3 * sin(2 * .pi * 880 * n / 48000))
        }
        results[app.withUnsafeBytes { phone.pushAudio($0, format: .s16, rate: 48000, channels: 2, time: audioTime) }, default: 0] += 1
        if audioTime >= 2 {
            results[mic.withUnsafeBytes { phone.pushAudio($0, format: .f32, rate: 48000, channels: 1, time: audioTime, to: .mic) }, default: 0] += 1
        }
        block += 1
    }
}
phone.finish()
try live.wait()
print("pushed: \(results.map { "\($0.value) \($0.key)" }.sorted().joined(separator: ", ")); slowest picture push \(String(format: "%.3f", slowest * 1000)) ms")
print("wrote \(output)")
