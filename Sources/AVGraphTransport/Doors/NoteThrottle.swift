import AVGraph

/// A few warnings a second of each kind: a flood of refused connections (a scan, thousands of
/// silent sockets timing out together) says so in a few lines a second that count the others,
/// instead of a line each; a handful of refusals are each said.
public struct NoteThrottle: Sendable {
    public let interval: Double
    public let lines: Int
    private var windows: [String: (start: Double, said: Int, quiet: Int)] = [:]

    public init(interval: Double = 1, lines: Int = 5) {
        self.interval = interval
        self.lines = max(1, lines)
    }

    /// nil: say nothing this time (counted); otherwise say it, with how many went unsaid since.
    public mutating func pass(_ kind: String, now: Double = Monotonic.now) -> Int? {
        var w = windows[kind] ?? (now, 0, 0)
        if now - w.start >= interval { w = (now, 0, w.quiet) }
        defer { windows[kind] = w }
        guard w.said < lines else {
            w.quiet += 1
            return nil
        }
        w.said += 1
        defer { w.quiet = 0 }
        return w.quiet
    }

    /// How a line says the ones not said.
    public static func suffix(_ quiet: Int) -> String { quiet == 0 ? "" : " (and \(quiet) more like it since the last such warning)" }
}
