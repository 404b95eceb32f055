// Pushes generated screen pictures (NV12, a phone turned to landscape half-way), app audio and a
// microphone into a pipeline through the Swift API, the way a broadcast extension's
// `processSampleBuffer` would, and records them to a file or sends them live.
//
//     swift run -c release PushExample [OUTPUT] [--size WxH] [--seconds N] [--copy] [--set NODE.OPTION=VALUE]...
//
// OUTPUT is a file path (MP4, default out/push-example.mp4), an rtmp:// or rtmps:// URL (an
// `rtmp` sink) or an srt:// URL (an `srt` sink). Pictures are pushed without a copy by default
// (`pushNV12(..., owner:)`): like ReplayKit's pixel buffer pool, the example keeps two screen
// buffers and reuses one only once the pipeline has let go of it (when both are still in the
// pipeline, that picture is skipped and counted; the fps node repeats the last one). `--copy`
// uses the copying push instead (the pipeline's own bounded picture pool: ~13 MB more at
// 1170x2532).
//
// Prints what came back from the pushes, the slowest picture push and the process's memory:
// the peak of RssAnon (private memory, what a phone's footprint limit counts), sampled from
// /proc/self/status every 20 ms while it runs. bench/run (P1) runs it with a phone's 1170x2532
// screen for 30 s.
import AVGraph
import AVGraphNodes
import Foundation
import Synchronization

var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
    defer { arguments.removeSubrange(i...i + 1) }
    return arguments[i + 1]
}
@MainActor func flag(_ name: String) -> Bool {
    guard let i = arguments.firstIndex(of: name) else { return false }
    arguments.remove(at: i)
    return true
}
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("PushExample: \(message)\n".utf8))
    exit(2)
}
let sizeParts = (option("--size") ?? "720x1280").split(separator: "x").compactMap { Int($0) }
guard sizeParts.count == 2, sizeParts[0] > 0, sizeParts[1] > 0, sizeParts[0] % 2 == 0, sizeParts[1] % 2 == 0 else {
    fail("--size wants an even WxH, like 1170x2532")
}
let (width, height) = (sizeParts[0], sizeParts[1])
guard let seconds = Double(option("--seconds") ?? "5"), seconds > 0 else { fail("--seconds wants a positive number") }
let copying = flag("--copy")
var overrides: [String] = []
while let o = option("--set") { overrides.append(o) }    // like avgraph run --set, e.g. video.preset=ultrafast
if let unknown = arguments.first(where: { $0.hasPrefix("--") }) { fail("unknown option \(unknown)") }
let output = arguments.first ?? FileManager.default.currentDirectoryPath + "/out/push-example.mp4"

// Values go into the pipe text as YAML double-quoted strings (a URL has ':' and may have '?').
func quoted(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
let sink: String
if output.hasPrefix("rtmp://") || output.hasPrefix("rtmps://") {
    sink = "{type: rtmp, in: [video, audio], url: \(quoted(output))}"
} else if output.hasPrefix("srt://") {
    sink = "{type: srt, in: [video, audio], url: \(quoted(output))}"
} else if output.contains("://") {
    fail("OUTPUT is a file path, an rtmp:// or an srt:// URL; got \(output)")
} else {
    sink = "{type: file, in: [video, audio], path: \(quoted(output)), overwrite: true}"
    try? FileManager.default.createDirectory(atPath: (output as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
}
// Sized for a phone's 50 MB: zero-copy pushes need no pictures of the pipeline's own
// (preallocate: false); a backlog behind the encoder drops the oldest 720p picture instead of
// queueing it (queue size 1), and all queued media together stay within memory-limit.
let pipe = """
pipeline: push-example
memory-limit: 10MB
nodes:
  phone:   {type: app, size: \(width)x\(height), preallocate: \(copying)}
  upright: {type: orient, in: phone.video}
  fit:     {type: resize, in: upright, size: 1280x720, mode: fit}
  smooth:  {type: fps, in: fit, rate: 30, queue: {size: 1, policy: drop-oldest}}
  mix:     {type: mixer, in: [phone.audio, phone.mic], rate: 48000}
  video:   {type: h264, in: smooth, bitrate: 2500k, bframes: 0, queue: {size: 1, policy: drop-oldest}}
  audio:   {type: aac, in: mix, bitrate: 128k}
  out:     \(sink)
"""
let file = NSTemporaryDirectory() + "push-example-\(getpid()).pipe"
try pipe.write(toFile: file, atomically: true, encoding: .utf8)
defer { try? FileManager.default.removeItem(atPath: file) }

/// Samples this process's private memory (RssAnon) and resident set from the kernel's own
/// account while the push runs, keeping the peaks: the final value alone misses a backlog.
final class MemorySampler: Sendable {
    struct Peaks {
        var running = true
        var anonKB = 0
        var rssKB = 0
        var samples = 0
    }
    private let peaks = Mutex(Peaks())
    var peakAnonKB: Int { peaks.withLock { $0.anonKB } }
    var peakRssKB: Int { peaks.withLock { $0.rssKB } }
    var samples: Int { peaks.withLock { $0.samples } }

    static func status() -> [String: Int] {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return [:] }
        var values: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("Rss") || line.hasPrefix("VmHWM") {
            let parts = line.split(whereSeparator: { $0 == ":" || $0 == " " || $0 == "\t" })
            if parts.count >= 2, let kb = Int(parts[1]) { values[String(parts[0])] = kb }
        }
        return values
    }

    func sample() {
        let s = Self.status()
        peaks.withLock {
            $0.anonKB = max($0.anonKB, s["RssAnon"] ?? 0)
            $0.rssKB = max($0.rssKB, (s["RssAnon"] ?? 0) + (s["RssFile"] ?? 0) + (s["RssShmem"] ?? 0))
            $0.samples += 1
        }
    }

    func start(every interval: Double) {
        let thread = Thread { [self] in
            while peaks.withLock({ $0.running }) {
                sample()
                usleep(UInt32(interval * 1e6))
            }
        }
        thread.name = "memory-sampler"
        thread.start()
    }

    /// The peak so far, read at the end of the pushes (what follows is flushing and finalizing).
    func peakSoFar() -> Int {
        sample()
        return peakAnonKB
    }

    func stop() {
        sample()
        peaks.withLock { $0.running = false }
    }
}

/// Screen buffers the way ReplayKit hands them out: a small pool of NV12 pictures (page-aligned,
/// mapped once), each reused only after the pipeline has released the last push of it. Pushed
/// with `owner:` a `Lease`, whose end puts the buffer back.
final class ScreenBuffers: Sendable {
    // Plain mapped memory without state of its own; who may write it is the lease's business.
    final class Buffer: @unchecked Sendable {
        let y: UnsafeMutableRawPointer, uv: UnsafeMutableRawPointer
        let bytes: Int
        init(width: Int, height: Int) {
            bytes = width * height * 3 / 2
            let base = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            y = base
            uv = base + width * height
            memset(uv, 128, width * height / 2)      // neutral chroma, written once
        }
        deinit { munmap(y, bytes) }
    }
    final class Lease {
        let buffer: Buffer
        private let pool: ScreenBuffers
        init(_ buffer: Buffer, _ pool: ScreenBuffers) { self.buffer = buffer; self.pool = pool }
        deinit { pool.giveBack(buffer) }
    }

    let width: Int, height: Int, limit: Int
    private struct Pool {
        var free: [Buffer] = []
        var made = 0
    }
    private let pool = Mutex(Pool())
    var made: Int { pool.withLock { $0.made } }

    init(width: Int, height: Int, limit: Int) {
        self.width = width
        self.height = height
        self.limit = limit
    }

    /// A buffer no push still holds, or nil when `limit` are all in the pipeline (the capture
    /// skips that picture, as a pool that has run dry does).
    func lease() -> Lease? {
        let buffer: Buffer? = pool.withLock { pool in
            if let b = pool.free.popLast() { return b }
            guard pool.made < limit else { return nil }
            pool.made += 1
            return Buffer(width: width, height: height)
        }
        return buffer.map { Lease($0, self) }
    }

    fileprivate func giveBack(_ b: Buffer) { pool.withLock { $0.free.append(b) } }
}

FFmpegLog.errorsOnly()
let memory = MemorySampler()
memory.start(every: 0.02)
let live: LivePipeline
do { live = try LivePipeline(path: file, overrides: overrides) } catch { fail("\(error)") }
live.start()
guard let phone = live.appSource(named: "phone") else { fail("no app source named 'phone'") }

let screens = ScreenBuffers(width: width, height: height, limit: 2)
var copySource: ScreenBuffers.Lease? = copying ? screens.lease() : nil
var app = [Int16](repeating: 0, count: 1024 * 2)     // 440 Hz, stereo, s16
var mic = [Float](repeating: 0, count: 1024)         // 880 Hz, mono, f32, from 2 s on
var results: [PushResult: Int] = [:]
var sourceBusy = 0
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
        frame += 1
        guard let lease = copySource ?? screens.lease() else { sourceBusy += 1; continue }
        // A gray ramp that scrolls; the phone is turned to landscape half-way (same portrait buffer, tag `left`).
        let b = lease.buffer
        for y in 0..<height { memset(b.y + y * width, Int32(16 + (y + frame * 8) % 220), width) }
        let orientation: Orientation = videoTime < seconds / 2 ? .up : .left
        let t0 = Date()
        let r = copying
            ? phone.pushNV12(width: width, height: height, y: b.y, yStride: width, uv: b.uv, uvStride: width,
                             time: videoTime, orientation: orientation)
            : phone.pushNV12(width: width, height: height, y: b.y, yStride: width, uv: b.uv, uvStride: width,
                             time: videoTime, orientation: orientation, owner: lease)
        slowest = max(slowest, Date().timeIntervalSince(t0))
        results[r, default: 0] += 1
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
let pushingPeakKB = memory.peakSoFar()
phone.finish()
copySource = nil
do { try live.wait() } catch { fail("\(Redaction.url(output)): \(error)") }
memory.stop()
print("pushed: \(results.map { "\($0.value) \($0.key)" }.sorted().joined(separator: ", ")); slowest picture push \(String(format: "%.3f", slowest * 1000)) ms")
print("screen buffers: \(screens.made) of \(width)x\(height) (\(copying ? "copying push" : "zero-copy push")), \(sourceBusy) pictures skipped with every buffer still in the pipeline")
print("wrote \(Redaction.url(output))")
let final = MemorySampler.status()
func mb(_ kb: Int) -> String { String(format: "%.1f MB", Double(kb) / 1024) }
print("memory: peak RssAnon \(mb(memory.peakAnonKB)) (private, sampled every 20 ms: \(memory.samples) samples; \(mb(pushingPeakKB)) while pushing), "
      + "peak RSS \(mb(max(memory.peakRssKB, final["VmHWM"] ?? 0))); at the end RssAnon \(mb(final["RssAnon"] ?? 0)), RssFile \(mb(final["RssFile"] ?? 0))")
