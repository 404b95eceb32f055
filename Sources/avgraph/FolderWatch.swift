import AVGraph
import Foundation

/// Waits for a name to appear in a folder (a pipeline's socket being bound) with inotify, so a
/// waiting `feed` wakes when the socket is made instead of looking again every so often.
/// Made before the first look, so a socket created between the look and the wait is not missed.
final class FolderWatch {
    private let fd: Int32

    init(_ folder: String) {
        fd = inotify_init1(Int32(O_CLOEXEC | O_NONBLOCK))
        // IN_CREATE | IN_MOVED_TO | IN_ATTRIB: a socket is created, renamed in, or gets its mode.
        if fd >= 0 { _ = inotify_add_watch(fd, folder, 0x100 | 0x80 | 0x4) }
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Waits until something changes in the folder or monotonic `deadline` passes; false at the deadline.
    @discardableResult
    func wait(until deadline: Double) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var n: Int32
        repeat {
            let ms = Int32(min(max(0, deadline - Monotonic.now), 3600) * 1000)
            n = poll(&p, 1, ms)
        } while n < 0 && errno == EINTR
        var events = [UInt8](repeating: 0, count: 4096)
        while fd >= 0 && read(fd, &events, events.count) > 0 {}
        return n > 0
    }
}
