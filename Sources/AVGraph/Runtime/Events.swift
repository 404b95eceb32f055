import Foundation

/// The run's event stream: `--events json` writes one JSON object a line (start, stats, level,
/// warning, error, eos); the control socket's `watch` will read the same stream.
public final class EventLog: @unchecked Sendable {
    public enum Output: Sendable { case none, json }

    private let lock = NSLock()
    private let output: Output
    private var listeners: [(String) -> Void] = []
    public let started = Date()

    public init(output: Output) { self.output = output }

    public func addListener(_ f: @escaping @Sendable (String) -> Void) {
        lock.lock()
        listeners.append(f)
        lock.unlock()
    }

    public func emit(_ event: String, _ fields: [String: Any] = [:]) {
        var o = fields
        o["event"] = event
        o["wall"] = (Date().timeIntervalSince(started) * 1000).rounded() / 1000
        guard let data = try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]),
              let line = String(data: data, encoding: .utf8) else { return }
        lock.lock()
        defer { lock.unlock() }
        if output == .json {
            StandardStreams.write(line + "\n")
        }
        for l in listeners { l(line) }
    }
}

/// Resident memory of this process, from /proc (the figure a phone's memory ceiling counts).
public enum ProcessMemory {
    public static var residentBytes: Int {
        guard let s = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let parts = s.split(separator: " ")
        guard parts.count > 1, let pages = Int(parts[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    public static var peakResidentBytes: Int {
        guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in s.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let kb = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
            return kb * 1024
        }
        return 0
    }
}
