import Foundation

/// A file descriptor that becomes readable once `signal()` is called (a pipe's read end): a
/// thread blocked in poll(2) on its sockets polls this too, so a stop wakes it at once instead
/// of being noticed at the next timeout.
final class StopEvent: Sendable {
    private let ends: [Int32]
    var fd: Int32 { ends[0] }

    init() {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for e in ends { _ = fcntl(e, F_SETFD, FD_CLOEXEC); _ = fcntl(e, F_SETFL, O_NONBLOCK) }
        } else {
            ends = [-1, -1]
        }
        self.ends = ends
    }

    deinit { for e in ends where e >= 0 { close(e) } }

    func signal() {
        var one: UInt8 = 1
        _ = write(ends[1], &one, 1)
    }
}
