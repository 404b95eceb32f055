import Foundation

/// CPU seconds (user + system) spent, for `eos`: where a run's CPU went. A node's own thread is
/// measured where it ends; what a node hands to threads of its own (x264's frame threads,
/// swscale's slices, `resize`'s workers) counts only in the process figure.
public enum CPUTime {
    /// The calling thread's CPU time so far.
    public static var thisThread: Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// The whole process's CPU time so far, every thread included.
    public static var process: Double {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
