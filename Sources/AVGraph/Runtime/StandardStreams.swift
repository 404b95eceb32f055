import Foundation

/// Writes to standard output and error that outlive their reader: the program ignores SIGPIPE,
/// so a reader that went away (`| head -1`) is an EPIPE here, after which that stream is
/// dropped and the run goes on (a recording must not die with its event stream).
public enum StandardStreams {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var gone: Set<Int32> = []

    /// Writes all of `text` to `fd`; false once the stream is gone.
    @discardableResult
    public static func write(_ text: String, to fd: Int32 = STDOUT_FILENO) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if gone.contains(fd) { return false }
        var bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Foundation.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                gone.insert(fd)
                return false
            }
            done += n
        }
        bytes.removeAll()
        return true
    }

    /// Whether `fd` was dropped after a failed write.
    public static func isGone(_ fd: Int32) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return gone.contains(fd)
    }
}
