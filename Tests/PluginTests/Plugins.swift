import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// Finds the plugin libraries built beside this test binary (`swift build` builds them; `swift test` too).
enum Plugins {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static let buildDirectory: String = {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("libAVGraphWatermark.so").path) { return dir.path }
            dir = dir.deletingLastPathComponent()
        }
        return packageRoot + "/.build/release"
    }()

    static func library(_ product: String) throws -> String {
        let path = buildDirectory + "/lib\(product).so"
        guard FileManager.default.fileExists(atPath: path) else {
            throw XCTSkip("\(path) is not built: run `swift build` (it builds the plugins and fixtures)")
        }
        return path
    }

    static var watermark: String { get throws { try library("AVGraphWatermark") } }
    static var ducker: String { get throws { try library("AVGraphDucker") } }

    /// The built-ins plus both example plugins.
    static func registry() throws -> NodeRegistry {
        FFmpegLog.errorsOnly()
        let r = BuiltinNodes.registry()
        try PluginLoader.load([watermark, ducker], into: r)
        return r
    }

    static func scratch(_ name: String = #function) -> String {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        let dir = NSTemporaryDirectory() + "avgraph-tests/\(safe)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Decodes the first video stream (yuv420p, `width`x`height`) with ffmpeg as a witness; returns
    /// each frame's Y plane as stored (limited range, no conversion).
    static func decodeGray(_ path: String, width: Int, height: Int) throws -> [[UInt8]] {
        let data = try ffmpeg(["-i", path, "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"])
        let size = width * height * 3 / 2
        return stride(from: 0, to: data.count - size + 1, by: size).map { Array(data[$0..<$0 + width * height]) }
    }

    /// Decodes the first audio stream to mono float samples at `rate`.
    static func decodeAudio(_ path: String, rate: Int) throws -> [Float] {
        let data = try ffmpeg(["-i", path, "-map", "0:a:0", "-ac", "1", "-ar", "\(rate)", "-f", "f32le", "-"])
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    static func ffmpeg(_ args: [String]) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error"] + args
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return data
    }

    /// Peak amplitude of the `freq` component of `samples` (Goertzel).
    static func toneLevel(_ samples: ArraySlice<Float>, freq: Double, rate: Int) -> Double {
        let coeff = 2 * cos(2 * Double.pi * freq / Double(rate))
        var s1 = 0.0, s2 = 0.0
        for x in samples { let s0 = Double(x) + coeff * s1 - s2; s2 = s1; s1 = s0 }
        return 2 * sqrt(max(s1 * s1 + s2 * s2 - coeff * s1 * s2, 0)) / Double(max(samples.count, 1))
    }
}
