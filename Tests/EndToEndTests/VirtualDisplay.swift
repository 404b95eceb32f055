import Foundation
import XCTest

/// A private X server (Xvfb) for screen-capture tests: it picks a free display number itself
/// (`-displayfd`), so parallel runs never collide, and `stop()` ends it and every client the
/// test started on it. Tests call `stop()` from a teardown block, so it runs on failure too.
final class VirtualDisplay: @unchecked Sendable {
    let number: Int
    let width: Int
    let height: Int
    var name: String { ":\(number)" }
    private let server: Process
    private var clients: [Process] = []
    private let lock = NSLock()

    /// The Xvfb binary on PATH, or nil when it is not installed.
    static var xvfbPath: String? { which("Xvfb") }

    static func which(_ tool: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") + ["/usr/bin"] {
            let p = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return nil
    }

    /// Starts Xvfb with a `width`x`height` 24-bit screen and a black root window.
    init(width: Int = 640, height: Int = 480) throws {
        guard let xvfb = Self.xvfbPath else { throw XCTSkip("Xvfb is not installed (scripts/setup installs it): screen capture not tested") }
        self.width = width
        self.height = height
        let p = Process()
        p.executableURL = URL(fileURLWithPath: xvfb)
        // -displayfd 1: Xvfb finds a free display number and writes it to stdout once it accepts clients.
        p.arguments = ["-displayfd", "1", "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-br", "-noreset"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        server = p
        let text = CLI.DataBox()
        out.fileHandleForReading.readabilityHandler = { h in text.append(h.availableData) }
        let deadline = Date().addingTimeInterval(15)
        var found: Int?
        while Date() < deadline, p.isRunning {
            if let line = text.string.split(separator: "\n").first, let n = Int(line.trimmingCharacters(in: .whitespaces)) {
                found = n
                break
            }
            usleep(20_000)
        }
        out.fileHandleForReading.readabilityHandler = nil
        guard let found else {
            if p.isRunning { p.terminate() }
            p.waitUntilExit()
            throw NSError(domain: "VirtualDisplay", code: 1, userInfo: [NSLocalizedDescriptionKey: "Xvfb did not announce a display within 15 s"])
        }
        number = found
    }

    deinit { stop() }

    /// Starts `tool` as a client of this display (killed by `stop()`).
    @discardableResult
    func launch(_ tool: String, _ args: [String]) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [tool] + args
        var env = ProcessInfo.processInfo.environment
        env["DISPLAY"] = name
        env["SDL_AUDIODRIVER"] = "dummy"
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        lock.lock()
        clients.append(p)
        lock.unlock()
        return p
    }

    /// Shows `image` borderless with its top-left corner at (`x`, `y`) (ffplay; no window manager moves it).
    func show(image: String, x: Int, y: Int) throws {
        try launch("ffplay", ["-v", "error", "-an", "-noborder", "-left", "\(x)", "-top", "\(y)", image])
    }

    /// One grab of `w`x`h` at (`x`, `y`) as packed RGB, by ffmpeg's own x11grab (to know the window is up).
    func pixels(x: Int, y: Int, w: Int, h: Int) throws -> [UInt8] {
        Array(try CLI.capture(["ffmpeg", "-v", "error", "-f", "x11grab", "-video_size", "\(w)x\(h)", "-grab_x", "\(x)", "-grab_y", "\(y)",
                               "-i", name, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]))
    }

    /// Waits until the pixel at (`x`, `y`) is `rgb` (a window mapped and painted), up to `timeout` seconds.
    func waitFor(rgb: (Int, Int, Int), atX x: Int, y: Int, timeout: Double = 15) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let p = try pixels(x: x, y: y, w: 1, h: 1)
            if p.count == 3, abs(Int(p[0]) - rgb.0) < 24, abs(Int(p[1]) - rgb.1) < 24, abs(Int(p[2]) - rgb.2) < 24 { return true }
            usleep(100_000)
        }
        return false
    }

    /// Safe to call more than once, from any thread.
    func stop() {
        lock.lock()
        defer { lock.unlock() }
        for c in clients where c.isRunning {
            c.terminate()
            c.waitUntilExit()
        }
        clients.removeAll()
        guard server.isRunning else { return }
        server.terminate()
        let deadline = Date().addingTimeInterval(5)
        while server.isRunning && Date() < deadline { usleep(20_000) }
        if server.isRunning { kill(server.processIdentifier, SIGKILL) }
        server.waitUntilExit()
    }

    /// A display number nobody serves (no socket, no lock file), for "cannot open" tests.
    static func unusedDisplayNumber() -> Int {
        for n in 900..<1000 where !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)")
            && !FileManager.default.fileExists(atPath: "/tmp/.X\(n)-lock") {
            return n
        }
        return 999
    }
}
