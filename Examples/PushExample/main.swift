// Pushes five seconds of generated screen pictures (NV12, a phone turned to landscape half-way),
// app audio and a microphone into a pipeline through the Swift API, the way a broadcast
// extension's `processSampleBuffer` would, and records them.
//
//     swift run -c release PushExample [OUTPUT.mp4] [--size WxH] [--seconds N]
//
// Prints what came back from the pushes, the slowest picture push and the process's peak memory
// (bench/run uses it with a phone's 1170x2532 screen for 30 s).
import AVGraph
import AVGraphNodes
import Foundation

var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(i...i + 1) }
    return arguments[i + 1]
}
let sizeParts = (option("--size") ?? "720x1280").split(separator: "x").compactMap { Int($0) }
guard sizeParts.count == 2, sizeParts[0] > 0, sizeParts[1] > 0, sizeParts[0] % 2 == 0, sizeParts[1] % 2 == 0 else {
    fatalError("--size wants an even WxH, like 1170x2532")
}
let (width, height) = (sizeParts[0], sizeParts[1])
guard let seconds = Double(option("--seconds") ?? "5"), seconds > 0 else { fatalError("--seconds wants a positive number") }
let output = arguments.first ?? FileManager.default.currentDirectoryPath + "/out/push-example.mp4"
let pipe = """
pipeline: push-example
nodes:
  phone:   {type: app, size: \(width)x\(height)}
  upright: {type: orient, in: phone.video}
  fit:     {type: resize, in: upright, size: 1280x720, mode: fit}
  smooth:  {type: fps, in: fit, rate: 30}
  mix:     {type: mixer, in: [phone.audio, phone.mic], rate: 48000}
  video:   {type: h264, in: smooth, bitrate: 2500k, bframes: 0}
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

// An NV12 screen: a gray ramp that scrolls; the chroma plane stays neutral.
var luma = [UInt8](repeating: 0, count: width * height)
let chroma = [UInt8](repeating: 128, count: width * height / 2)
var app = [Int16](repeating: 0, count: 1024 * 2)     // 440 Hz, stereo, s16
var mic = [Float](repeating: 0, count: 1024)         // 880 Hz, mono, f32, from 2 s on
var results: [PushResult: Int] = [:]
var slowest = 0.0

let start = Date()
var frame = 0, block = 0
let pictures = Int(seconds * 30)
while frame < pictures {
    let videoTime = Double(frame) / 30, audioTime = Double(block) * 1024 / 48000
    let next = min(videoTime, audioTime)
    let wait = next - Date().timeIntervalSince(start)
    if wait > 0 { usleep(UInt32(wait * 1e6)) }
    if videoTime <= audioTime {
        for y in 0..<height { memset(&luma[y * width], Int32(16 + (y + frame * 8) % 220), width) }
        // The phone is turned to landscape half-way: same portrait buffer, tag `left`.
        let t0 = Date()
        let r = luma.withUnsafeBytes { y in chroma.withUnsafeBytes { uv in
            phone.pushNV12(width: width, height: height, y: y.baseAddress!, yStride: width, uv: uv.baseAddress!, uvStride: width,
                           time: videoTime, orientation: videoTime < seconds / 2 ? .up : .left)
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
/// Peak and private resident memory of this process, from the kernel's own account.
let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
let memory = status.split(separator: "\n").filter { $0.hasPrefix("VmHWM") || $0.hasPrefix("RssAnon") || $0.hasPrefix("RssFile") }
print("memory: " + memory.map { $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ") }.joined(separator: ", "))
