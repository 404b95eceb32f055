import Foundation
import Synchronization

/// Writes to standard output and error that outlive their reader: the program ignores SIGPIPE,
/// so a reader that went away (`| head -1`) is an EPIPE here, after which that stream is
/// dropped and the run goes on (a recording must not die with its event stream).
public enum StandardStreams {
    /// Streams found gone; held while writing, so lines from different threads never interleave.
    private static let gone = Mutex<Set<Int32>>([])

    /// Writes all of `text` to `fd`; false once the stream is gone.
    @discardableResult
    public static func write(_ text: String, to fd: Int32 = STDOUT_FILENO) -> Bool {
        gone.withLock { gone in
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
    }

    /// Whether `fd` was dropped after a failed write.
    public static func isGone(_ fd: Int32) -> Bool {
        gone.withLock { $0.contains(fd) }
    }
}
