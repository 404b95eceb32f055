import AVGraph
import Foundation

/// How `avgraph serve` hands a run its publishers: one stream of frames on the run's standard
/// input (a pipe: no second network hop, no socket path to agree on). A frame is a kind byte, a
/// big-endian UInt32 length and that many bytes: `S` a publisher begins (JSON: peer, key, app,
/// format), `D` its bytes (FLV or MPEG-TS, as it sent them), `E` it left. A publisher that comes
/// back with the same key within the run's `idle` is another `S` on the same pipe: the run's
/// source continues its timeline as for any reconnect.
public enum PublisherRelayFrame {
    public static let begin = UInt8(ascii: "S"), data = UInt8(ascii: "D"), end = UInt8(ascii: "E")
    /// Bytes of one `D` frame, at most.
    public static let maxData = 64 * 1024

    public struct Start: Codable, Sendable {
        public var peer: String, key: String, app: String, format: String
        public init(peer: String, key: String, app: String, format: String) {
            (self.peer, self.key, self.app, self.format) = (peer, key, app, format)
        }
    }

    public static func header(_ kind: UInt8, length: Int) -> [UInt8] {
        [kind, UInt8(length >> 24 & 0xff), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
    }
}

/// The run's side of the relay: reads the frames from a file descriptor (standard input) on its
/// own thread and announces each publisher as a `PublisherStream` to the source's reader. It
/// reads only while the current stream has room, so a slow run holds its pipe, `serve`'s relay
/// and, through them, the publisher's TCP (SRT drops, as it does live).
// @unchecked: a subclass (see PublisherHandoff); `current` and `buffer` are the relay thread's alone.
package final class PublisherRelay: PublisherListener, @unchecked Sendable {
    private let fd: Int32
    private var current: PublisherStream?
    private var buffer: [UInt8] = []

    package init(fd: Int32) throws {
        self.fd = fd
        try super.init(threadName: "publisher-relay")
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    package override func run() {
        defer { current?.end() }
        while !isStopped {
            guard let header = take(5) else { return }
            let length = Int(header[1]) << 24 | Int(header[2]) << 16 | Int(header[3]) << 8 | Int(header[4])
            guard length <= 1 << 20, let body = take(length) else {
                note("the relay from avgraph serve broke (a frame of \(length) bytes)")
                return
            }
            switch header[0] {
            case PublisherRelayFrame.begin:
                current?.end()
                guard let start = try? JSONDecoder().decode(PublisherRelayFrame.Start.self, from: Data(body)) else {
                    note("the relay from avgraph serve broke (an unreadable publisher)")
                    return
                }
                let stream = PublisherStream(peer: start.peer, key: start.key, app: start.app, format: start.format) { [weak self] in self?.poke() }
                current = stream
                announce(stream)
            case PublisherRelayFrame.data:
                guard let stream = current, !stream.isAbandoned else { continue }
                while stream.isFull && !stream.isAbandoned && !isStopped { _ = waitReadable(input: false) }
                stream.append(body)
            case PublisherRelayFrame.end:
                current?.end()
                current = nil
            default:
                note("the relay from avgraph serve broke (frame kind \(header[0]))")
                return
            }
        }
    }

    /// `n` bytes from the pipe; nil at its end or at stop.
    private func take(_ n: Int) -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while buffer.count < n {
            guard !isStopped else { return nil }
            let got = read(fd, &chunk, chunk.count)
            if got > 0 {
                buffer += chunk.prefix(got)
            } else if got == 0 || errno != EAGAIN && errno != EINTR {
                return nil
            } else {
                _ = waitReadable(input: true)
            }
        }
        let out = Array(buffer.prefix(n))
        buffer.removeFirst(n)
        return out
    }

    /// Waits for the pipe (with `input`) or a wake: room in the stream, or stop.
    private func waitReadable(input: Bool) -> Bool {
        var fds = [pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
        if input { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
        let n = poll(&fds, nfds_t(fds.count), 1000)
        if fds[0].revents != 0 { drainWake() }
        return n > 0
    }
}
