import Foundation
import XCTest

/// Runs the built `avgraph` binary as a user would, and probes what it wrote.
enum CLI {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// The avgraph binary of the same build configuration as these tests.
    static let binary: String = {
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = testBinary.deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("avgraph").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        for config in ["release", "debug"] {
            let p = packageRoot + "/.build/\(config)/avgraph"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return packageRoot + "/.build/debug/avgraph"
    }()

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs avgraph with `args`; `interruptAfter` sends SIGINT after that many seconds.
    @discardableResult
    static func run(_ args: [String], cwd: String? = nil, interruptAfter: Double? = nil, timeout: Double = 600) throws -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = args
        if let cwd { p.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        let outData = DataBox(), errData = DataBox()
        out.fileHandleForReading.readabilityHandler = { h in outData.append(h.availableData) }
        err.fileHandleForReading.readabilityHandler = { h in errData.append(h.availableData) }
        try p.run()
        let start = Date()
        var interrupted = false
        while p.isRunning {
            usleep(20_000)
            let t = Date().timeIntervalSince(start)
            if let i = interruptAfter, !interrupted, t >= i { kill(p.processIdentifier, SIGINT); interrupted = true }
            if t > timeout { p.terminate(); XCTFail("avgraph \(args) timed out") }
        }
        p.waitUntilExit()
        out.fileHandleForReading.readabilityHandler = nil
        err.fileHandleForReading.readabilityHandler = nil
        outData.append(out.fileHandleForReading.readDataToEndOfFile())
        errData.append(err.fileHandleForReading.readDataToEndOfFile())
        return Result(status: p.terminationStatus, stdout: outData.string, stderr: errData.string)
    }

    final class DataBox: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        func append(_ d: Data) { lock.lock(); data.append(d); lock.unlock() }
        var string: String { lock.lock(); defer { lock.unlock() }; return String(decoding: data, as: UTF8.self) }
    }

    static func scratch(_ name: String = #function) -> String {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        let dir = NSTemporaryDirectory() + "avgraph-e2e/\(safe)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A new 0700 folder to be `XDG_RUNTIME_DIR`, and this process's environment naming it; the
    /// caller removes the folder. Short: a unix socket path has at most 107 bytes.
    static func privateRuntime() throws -> (folder: String, environment: [String: String]) {
        let folder = "/tmp/avg-rt-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = folder
        return (folder, environment)
    }

    static func write(_ text: String, to path: String) {
        try! text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    @discardableResult
    static func shell(_ args: [String]) throws -> String { String(decoding: try capture(args), as: UTF8.self) }

    static func probe(_ path: String, _ extra: [String] = []) throws -> [String: Any] {
        let out = try shell(["ffprobe", "-v", "error", "-print_format", "json", "-show_streams", "-show_format"] + extra + [path])
        return (try? JSONSerialization.jsonObject(with: Data(out.utf8))) as? [String: Any] ?? [:]
    }

    static func streams(_ probe: [String: Any]) -> [[String: Any]] { probe["streams"] as? [[String: Any]] ?? [] }
    static func stream(_ probe: [String: Any], _ type: String) -> [String: Any]? {
        streams(probe).first { $0["codec_type"] as? String == type }
    }

    /// Presentation timestamps (seconds) of every video frame, in order.
    static func videoFrameTimes(_ path: String) throws -> [Double] {
        let out = try shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time,pict_type",
                             "-of", "csv=p=0", path])
        return out.split(separator: "\n").compactMap { Double($0.split(separator: ",").first ?? "") }
    }

    static func pictTypes(_ path: String) throws -> [String] {
        let out = try shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pict_type", "-of", "csv=p=0", path])
        return out.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces.union(.punctuationCharacters)) }
    }

    /// Standard output of a command, as bytes (decoded media).
    static func capture(_ args: [String]) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return data
    }

    /// Decodes video to gray frames of the given size.
    static func grayFrames(_ path: String, width: Int, height: Int) throws -> [[UInt8]] {
        let data = try capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "gray",
                                "-s", "\(width)x\(height)", "-"])
        let n = width * height
        return stride(from: 0, to: data.count - n + 1, by: n).map { Array(data[$0..<$0 + n]) }
    }

    /// Decodes the first channel of the audio to float at `rate` (a downmix would change levels).
    /// testsrc's marker (a bright square in its top-left corner) must be in the top-left corner of
    /// `content` (the picture's rectangle inside a gray frame `width` wide) and in no other corner.
    static func assertMarkerTopLeft(_ frame: [UInt8], width: Int, content rect: (x: Int, y: Int, w: Int, h: Int), _ what: String,
                                    file: StaticString = #filePath, line: UInt = #line) {
        func mean(_ cx: Double, _ cy: Double) -> Double {
            let side = Double(min(rect.w, rect.h)) / 10
            let x0 = rect.x + Int(cx * Double(rect.w) - side / 2), y0 = rect.y + Int(cy * Double(rect.h) - side / 2)
            var sum = 0, n = 0
            for y in y0..<(y0 + Int(side)) { for x in x0..<(x0 + Int(side)) { sum += Int(frame[y * width + x]); n += 1 } }
            return Double(sum) / Double(n)
        }
        let tl = mean(0.06, 0.06), tr = mean(0.94, 0.06), bl = mean(0.06, 0.94), br = mean(0.94, 0.94)
        XCTAssertGreaterThan(tl, 180, "\(what): marker not top-left (tl \(tl) tr \(tr) bl \(bl) br \(br))", file: file, line: line)
        XCTAssertLessThan(max(tr, bl, br), 100, "\(what): another corner is bright (tl \(tl) tr \(tr) bl \(bl) br \(br))", file: file, line: line)
    }

    static func samples(_ path: String, rate: Int = 44100) throws -> [Float] {
        let data = try capture(["ffmpeg", "-v", "error", "-i", path, "-map", "0:a:0", "-af", "pan=mono|c0=c0", "-ar", "\(rate)",
                                "-f", "f32le", "-"])
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    /// Amplitude and phase of `freq` in a window (a single-bin DFT).
    static func component(_ x: ArraySlice<Float>, freq: Double, rate: Int, startIndex: Int) -> (amplitude: Double, phase: Double) {
        var re = 0.0, im = 0.0
        for (k, v) in x.enumerated() {
            let w = 2 * Double.pi * freq * Double(startIndex + k) / Double(rate)
            re += Double(v) * cos(w)
            im -= Double(v) * sin(w)
        }
        let n = Double(max(x.count, 1))
        return (2 * sqrt(re * re + im * im) / n, atan2(im, re))
    }

    /// Top-level MP4 boxes in file order.
    static func topLevelBoxes(_ path: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        var boxes: [String] = []
        var offset = 0
        while offset + 8 <= data.count {
            let size32 = data[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let type = String(decoding: data[offset + 4..<offset + 8], as: UTF8.self)
            var size = size32
            if size32 == 1, offset + 16 <= data.count { size = data[offset + 8..<offset + 16].reduce(0) { $0 << 8 | Int($1) } }
            if size32 == 0 { size = data.count - offset }
            boxes.append(type)
            if size < 8 { break }
            offset += size
        }
        return boxes
    }
}
