#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's open-file limit (RLIMIT_NOFILE) against what a server's connections need: every
/// connection is a descriptor, and a shell's soft limit (often 1024) is below what
/// `--http-connections` may ask while the hard limit allows far more.
public enum DescriptorLimit {
    /// Descriptors a run needs besides its HTTP connections: its files, sources' sockets, the
    /// event loops' own, the control socket, the other server.
    public static let reserve = 256

    /// Raises the soft limit to the hard one if `needed` descriptors do not fit under it; a
    /// warning when even the hard limit is too low (the server then refuses connections past
    /// it: accept fails, NIO says so and goes on).
    public static func raise(toFit needed: Int) -> String? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        guard rlim_t(needed) > limit.rlim_cur else { return nil }
        let soft = limit.rlim_cur
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            if setrlimit(resource, &limit) != 0 { limit.rlim_cur = soft }
        }
        guard rlim_t(needed) > limit.rlim_cur else { return nil }
        return "open-file limit: \(needed) descriptors wanted (--http-connections and \(reserve) for the rest of the run), " +
            "the hard limit (ulimit -Hn) allows \(limit.rlim_max), the soft one is \(limit.rlim_cur): connections past it are refused"
    }

    #if canImport(Glibc)
    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
