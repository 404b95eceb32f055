import NIOCore
import Synchronization

/// The open connections of a server, at most `limit`. A connection is waiting from when it opens
/// until its request head is in, and again between requests (keep-alive); otherwise it is being
/// answered or holds an event stream. When all places are taken, the connection that has waited
/// longest is closed for the newcomer: clients that trickle their header (or idle) cannot keep
/// a visitor out, only an answer in progress or an open stream can; and event streams may hold
/// half the places at most.
final class HTTPConnections: Sendable {
    private struct Entry {
        let channel: any Channel
        var waitingSince: NIODeadline?
        var streaming = false
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

    func waiting(_ channel: any Channel) { set(channel, waiting: .now()) }

    func busy(_ channel: any Channel) { set(channel, waiting: nil) }

    /// Marks `channel` as holding an event stream; false when half the places already do.
    func streaming(_ channel: any Channel) -> Bool {
        entries.withLock { entries in
            guard entries.values.count(where: \.streaming) < limit / 2 else { return false }
            entries[ObjectIdentifier(channel)]?.streaming = true
            return true
        }
    }

    var count: Int { entries.withLock { $0.count } }

    func remove(_ channel: any Channel) { _ = entries.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) } }

    /// Closes every connection; the future completes when all are closed.
    func closeAll(on loop: any EventLoop) -> EventLoopFuture<Void> {
        let open = entries.withLock { $0.values.map(\.channel) }
        return EventLoopFuture.andAllComplete(open.map { $0.close() }, on: loop)
    }

    private func set(_ channel: any Channel, waiting since: NIODeadline?) {
        entries.withLock { $0[ObjectIdentifier(channel)]?.waitingSince = since }
    }
}
