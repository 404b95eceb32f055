import Foundation

/// Seconds on `clock` (clock_gettime).
private func seconds(on clock: clockid_t) -> Double {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// Monotonic seconds (CLOCK_MONOTONIC), cheap and never jumping.
public enum Monotonic {
    public static var now: Double { seconds(on: CLOCK_MONOTONIC) }
}

/// CPU seconds (user + system) spent, for `eos`: where a run's CPU went. A node's own thread is
/// measured where it ends; what a node hands to threads of its own (x264's frame threads,
/// swscale's slices, `resize`'s workers) counts only in the process figure.
public enum CPUTime {
    /// The calling thread's CPU time so far.
    public static var thisThread: Double { seconds(on: CLOCK_THREAD_CPUTIME_ID) }

    /// The whole process's CPU time so far, every thread included.
    public static var process: Double { seconds(on: CLOCK_PROCESS_CPUTIME_ID) }
}
