import AVGraph
import AVGraphTransport
import Foundation
import NIOCore

/// One publisher's bytes into its run's standard input as relay frames, without a thread of its
/// own: the listener says when bytes have come, a frame goes out on the session's pipe channel
/// (NIO's, on an event loop), and the next read waits until that frame is written. One frame in
/// flight: a run that reads slowly fills the publisher's stream, the listener stops reading its
/// socket, and TCP holds the rest at the publisher, as when a thread was blocked in write(2).
// @unchecked: every field but the constants is touched on the channel's event loop only.
final class RelayPump: @unchecked Sendable {
    private let arrival: PublisherArrival
    private let channel: Channel
    private let finished: @Sendable (_ seconds: Double, _ bytes: Int) -> Void
    private var chunk = [UInt8](repeating: 0, count: PublisherRelayFrame.maxData)
    private var writing = false
    private var done = false
    private var bytes = 0
    private let began = Monotonic.now

    /// `finished` is called once, on the event loop, when the publisher has left (its end frame
    /// written) or the run stopped taking frames (then the publisher's connection is closed).
    init(_ arrival: PublisherArrival, into channel: Channel, finished: @escaping @Sendable (_ seconds: Double, _ bytes: Int) -> Void) {
        self.arrival = arrival
        self.channel = channel
        self.finished = finished
    }

    func start() {
        let start = PublisherRelayFrame.Start(peer: arrival.peer, key: arrival.key, app: arrival.app, format: arrival.format)
        let loop = channel.eventLoop
        loop.execute { [self] in
            guard let json = try? JSONEncoder().encode(start) else { return finish(ok: false) }
            send(PublisherRelayFrame.begin, Array(json)[...]) { [self] in
                arrival.whenReadable { [self] in loop.execute { self.pump() } }
            }
        }
    }

    private func pump() {
        guard !writing, !done else { return }
        let n = chunk.withUnsafeMutableBytes { arrival.readNow(into: $0) }
        guard let n else { return }
        if n == 0 {
            send(PublisherRelayFrame.end, []) { [self] in finish(ok: true) }
        } else {
            bytes += n
            send(PublisherRelayFrame.data, chunk[..<n]) { [self] in pump() }
        }
    }

    private func send(_ kind: UInt8, _ body: ArraySlice<UInt8>, then next: @escaping @Sendable () -> Void) {
        var frame = channel.allocator.buffer(capacity: 5 + body.count)
        frame.writeBytes(PublisherRelayFrame.header(kind, length: body.count))
        frame.writeBytes(body)
        writing = true
        channel.writeAndFlush(frame).whenComplete { [self] result in
            // A failure: the run is gone (its input broke, or the session closed the channel).
            guard case .success = result else { return finish(ok: false) }
            writing = false
            next()
        }
    }

    private func finish(ok: Bool) {
        guard !done else { return }
        done = true
        arrival.whenReadable(nil)
        if !ok { arrival.abandon() }
        finished(((Monotonic.now - began) * 1000).rounded() / 1000, bytes)
    }
}
