import Foundation
import Synchronization

/// The lines of a pipe, read as they come by a dispatch source: no thread waits on the pipe (a
/// run's stdout and stderr are two of them per session).
enum LineReader {
    /// Reads `fd` (made non-blocking; closed at its end) line by line on a queue of its own,
    /// calling `each` for every line (without its newline) and `end` once at end of file.
    static func start(_ fd: Int32, label: String, each: @escaping @Sendable (Data) -> Void, end: @escaping @Sendable () -> Void) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let partial = Partial()
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: DispatchQueue(label: label))
        source.setEventHandler { [source] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = read(fd, &buffer, buffer.count)
                if n > 0 {
                    for line in partial.append(buffer[..<n]) { each(line) }
                    continue
                }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
                // End of file (or a broken pipe): a last line without its newline is no whole event.
                source.cancel()
                return
            }
        }
        source.setCancelHandler {
            close(fd)
            end()
        }
        source.resume()
    }

    /// Bytes after the last newline; only the source's own queue touches them.
    private final class Partial: Sendable {
        private let data = Mutex(Data())

        func append(_ bytes: ArraySlice<UInt8>) -> [Data] {
            data.withLock { d in
                d.append(contentsOf: bytes)
                var lines: [Data] = []
                while let nl = d.firstIndex(of: 10) {
                    lines.append(Data(d[d.startIndex..<nl]))
                    d.removeSubrange(d.startIndex...nl)
                }
                return lines
            }
        }
    }
}
