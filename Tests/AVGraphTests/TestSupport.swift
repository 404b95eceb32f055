import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// Shared helpers: write a `.pipe` into a scratch folder, check it, run it, probe what it wrote.
enum TestSupport {
    static let registry = freshRegistry()

    /// The built-in node types in a registry of its own (tests add their own test nodes to it).
    /// FFmpeg's log is kept to errors, as the command line keeps it.
    static func freshRegistry() -> NodeRegistry {
        FFmpegLog.errorsOnly()
        return BuiltinNodes.registry()
    }

    /// A fresh scratch folder per call.
    static func scratch(_ name: String = #function) -> String {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        let dir = NSTemporaryDirectory() + "avgraph-tests/\(safe)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Writes `yaml` to `dir/name.pipe` and checks it.
    static func check(_ yaml: String, in dir: String, name: String = "test", overrides: [String] = []) -> CheckedPipeline {
        let path = dir + "/\(name).pipe"
        try! yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return Checker(registry: registry, overrides: overrides.compactMap(OptionOverride.init(parsing:))).check(path: path)
    }

    /// Checks and runs; fails the test on diagnostics. Returns the run's error, if any.
    @discardableResult
    static func run(_ yaml: String, in dir: String, realtime: Bool? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> CheckedPipeline {
        let checked = check(yaml, in: dir)
        guard checked.isValid else {
            XCTFail("pipe does not check:\n" + checked.diagnostics.map(\.description).joined(separator: "\n"), file: file, line: line)
            throw MediaError("invalid pipe")
        }
        let run = try PipelineRun(checked, events: EventLog(output: .none), realtime: realtime)
        try run.run()
        return checked
    }

    /// Runs ffmpeg (errors only, overwriting); throws when it fails.
    static func ffmpeg(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-y"] + args
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw MediaError("ffmpeg \(args) failed") }
    }

    /// Runs a command and returns its standard output.
    @discardableResult
    static func shell(_ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// ffprobe's JSON for a file: streams and format.
    static func probe(_ path: String, extra: [String] = []) throws -> [String: Any] {
        let out = try shell(["ffprobe", "-v", "error", "-print_format", "json", "-show_streams", "-show_format"] + extra + [path])
        return (try JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any] ?? [:]
    }

    /// Decodes the first video stream to raw gray (Y plane) frames of `width`x`height`.
    static func decodeGray(_ path: String, width: Int, height: Int) throws -> [[UInt8]] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "gray", "-s", "\(width)x\(height)", "-"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let frameSize = width * height
        return stride(from: 0, to: data.count - frameSize + 1, by: frameSize).map { Array(data[$0..<$0 + frameSize]) }
    }

    /// Decodes the first audio stream to mono float samples at `rate`.
    static func decodeAudio(_ path: String, rate: Int = 44100, channel: Int? = nil) throws -> [Float] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var af: [String] = []
        if let channel { af = ["-af", "pan=mono|c0=c\(channel)"] }
        p.arguments = ["ffmpeg", "-v", "error", "-i", path, "-map", "0:a:0"] + af + ["-ac", "1", "-ar", "\(rate)", "-f", "f32le", "-"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    /// Amplitude of the `freq` component in `samples` (Goertzel), normalised so a full-scale sine gives ~1.
    static func toneLevel(_ samples: ArraySlice<Float>, freq: Double, rate: Int) -> Double {
        let w = 2 * Double.pi * freq / Double(rate)
        let coeff = 2 * cos(w)
        var s1 = 0.0, s2 = 0.0
        for x in samples {
            let s0 = Double(x) + coeff * s1 - s2
            s2 = s1
            s1 = s0
        }
        let power = s1 * s1 + s2 * s2 - coeff * s1 * s2
        return 2 * sqrt(max(power, 0)) / Double(max(samples.count, 1))
    }
}
