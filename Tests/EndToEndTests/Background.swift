import Foundation
import XCTest

/// An `avgraph run` in the background, with its event stream collected line by line.
final class BackgroundRun: @unchecked Sendable {
    let process = Process()
    private let lock = NSLock()
    private var lines: [String] = []
    /// When each line arrived (seconds since 1970), beside it.
    private var arrivals: [Double] = []
    private var partial = Data()
    private var errData = Data()
    let started = Date()

    /// `prefix`: a command that runs avgraph (`ip netns exec NAME`, which becomes it).
    init(_ args: [String], cwd: String? = nil, environment: [String: String]? = nil, prefix: [String] = []) throws {
        process.executableURL = URL(fileURLWithPath: prefix.first ?? CLI.binary)
        process.arguments = prefix.isEmpty ? args : Array(prefix.dropFirst()) + [CLI.binary] + args
        if let cwd { process.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        out.fileHandleForReading.readabilityHandler = { [weak self] h in self?.take(h.availableData) }
        err.fileHandleForReading.readabilityHandler = { [weak self] h in
            guard let self else { return }
            let d = h.availableData
            self.lock.lock(); self.errData.append(d); self.lock.unlock()
        }
        try process.run()
    }

    private func take(_ d: Data) {
        lock.lock()
        defer { lock.unlock() }
        partial.append(d)
        while let nl = partial.firstIndex(of: 10) {
            lines.append(String(decoding: partial[partial.startIndex..<nl], as: UTF8.self))
            arrivals.append(Date().timeIntervalSince1970)
            partial.removeSubrange(partial.startIndex...nl)
        }
    }

    var events: [[String: Any]] {
        lock.lock()
        defer { lock.unlock() }
        return lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// When the first event matching `match` arrived, seconds since 1970 (the wallclock a test compares with).
    func arrival(of match: ([String: Any]) -> Bool) -> Double? {
        lock.lock()
        defer { lock.unlock() }
        for (line, at) in zip(lines, arrivals) {
            if let e = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], match(e) { return at }
        }
        return nil
    }

    var stderr: String { lock.lock(); defer { lock.unlock() }; return String(decoding: errData, as: UTF8.self) }

    /// Waits until an event matching `match` arrives (or `timeout`).
    @discardableResult
    func waitFor(timeout: Double = 20, _ match: ([String: Any]) -> Bool) -> [String: Any]? {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if let e = events.first(where: match) { return e }
            usleep(20_000)
        }
        return nil
    }

    /// Seconds of media the run reports (the last stats event), or wall time since start.
    var mediaTime: Double {
        events.last { $0["event"] as? String == "stats" }?["media_time"] as? Double ?? Date().timeIntervalSince(started)
    }

    func waitForExit(timeout: Double = 60) -> Int32 {
        let end = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < end { usleep(20_000) }
        if process.isRunning { process.terminate(); XCTFail("run did not end") }
        process.waitUntilExit()
        usleep(100_000)
        return process.terminationStatus
    }
}

/// A raw client of the control socket.
final class ControlClient {
    let fd: Int32

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let utf8 = Array(path.utf8)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in raw.copyBytes(from: utf8); raw[utf8.count] = 0 }
        let ok = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
        if !ok { close(fd); throw NSError(domain: "connect", code: Int(errno)) }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(raw: [UInt8]) {
        _ = raw.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func send(_ line: String) { send(raw: Array((line + "\n").utf8)) }

    private var pending = [UInt8]()

    /// Reads one reply line.
    func readLine() -> [String: Any]? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let nl = pending.firstIndex(of: 10) {
                let line = Array(pending[..<nl])
                pending.removeSubrange(...nl)
                return (try? JSONSerialization.jsonObject(with: Data(line))) as? [String: Any]
            }
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { return nil }
            pending += chunk[0..<n]
        }
    }

    func request(_ line: String) -> [String: Any]? {
        send(line)
        return readLine()
    }
}
