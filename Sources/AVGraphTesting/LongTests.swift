import Foundation

/// The switch for tests too long for every change: `AVGRAPH_LONG_TESTS=1` (CI's `.ci/run` sets
/// it) runs the long fault and load series in full; without it they run a shorter series or skip.
public enum LongTests {
    public static var enabled: Bool { ProcessInfo.processInfo.environment["AVGRAPH_LONG_TESTS"] == "1" }
}
