import NIOCore
import Synchronization

/// The open connections of a server, at most `limit`: TCP connections, an HTTP/2 connection's
/// streams counted in it. A connection is waiting from when it opens until a request head is in,
/// and again when no answer of it is in progress (keep-alive); otherwise it is being answered
/// (a `.later` or `.chunked` answer until its end) or holds an event stream. When all places are
/// taken, the connection that has waited longest is closed for the newcomer: clients that trickle
/// their header (or idle) cannot keep a visitor out, only an answer in progress or an open stream
/// can; and event streams may hold half the places at most.
final class HTTPConnections: Sendable {
    private struct Entry {
        let channel: any Channel
        var waitingSince: NIODeadline?
        /// Requests of it being answered (HTTP/1.1: at most one; HTTP/2: one a stream).
        var answering = 0
        var eventStreams = 0
    }

    let limit: Int
    private let entries = Mutex<[ObjectIdentifier: Entry]>([:])

    init(limit: Int) { self.limit = limit }

    /// Takes `channel` in, closing the longest waiting one if every place is taken; false when
    /// none is waiting (the newcomer is refused).
    func admit(_ channel: any Channel) -> Bool {
        let (admitted, evicted) = entries.withLock { entries -> (Bool, (any Channel)?) in
            var evicted: (any Channel)?
            if entries.count >= limit {
                let waiting = entries.compactMap { key, entry in entry.waitingSince.map { (key, $0) } }
                guard let oldest = waiting.min(by: { $0.1 < $1.1 }) else { return (false, nil) }
                evicted = entries.removeValue(forKey: oldest.0)?.channel
            }
            entries[ObjectIdentifier(channel)] = Entry(channel: channel, waitingSince: .now())
            return (true, evicted)
        }
        evicted?.close(promise: nil)
        return admitted
    }

    /// A request of `connection` is being answered from now.
    func answering(_ connection: any Channel) {
        update(connection) { entry in
            entry.answering += 1
            entry.waitingSince = nil
        }
    }

    /// One of its answers is over (written, or its stream gone); with none left it waits.
    func answered(_ connection: any Channel) {
        update(connection) { entry in
            entry.answering = max(0, entry.answering - 1)
            if entry.answering == 0 { entry.waitingSince = .now() }
        }
    }

    /// Marks `connection` as holding an event stream; false when half the places already hold one.
    func streaming(_ connection: any Channel) -> Bool {
        entries.withLock { entries in
            let key = ObjectIdentifier(connection)
            guard entries[key]?.eventStreams ?? 0 > 0 || entries.values.count(where: { $0.eventStreams > 0 }) < limit / 2 else { return false }
            entries[key]?.eventStreams += 1
            return true
        }
    }

    /// An event stream of `connection` ended while the connection stays (an HTTP/2 stream's).
    func streamEnded(_ connection: any Channel) {
        update(connection) { $0.eventStreams = max(0, $0.eventStreams - 1) }
    }

    var count: Int { entries.withLock { $0.count } }

    func remove(_ channel: any Channel) { _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) } }

    /// Closes every connection; the future completes when all are closed.
    func closeAll(on loop: any EventLoop) -> EventLoopFuture<Void> {
        let open = entries.withLock { $0.values.map(\.channel) }
        return EventLoopFuture.andAllComplete(open.map { $0.close() }, on: loop)
    }

    private func update(_ connection: any Channel, _ change: (inout Entry) -> Void) {
        entries.withLock { entries in
            if var entry = entries[ObjectIdentifier(connection)] {
                change(&entry)
                entries[ObjectIdentifier(connection)] = entry
            }
        }
    }
}
