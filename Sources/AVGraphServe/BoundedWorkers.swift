import AVGraph
import Foundation

/// At most `workers` threads taking items from a bounded line: what a flood of arrivals costs is
/// at most `backlog` items waiting, never a thread each. Work that blocks (an `--auth` question of
/// up to 2 s, starting a run) holds one worker; the others go on. A worker starts when an item
/// finds none free and ends after `linger` seconds without work, so an idle serve holds none.
public final class BoundedWorkers<Item: Sendable>: Sendable {
    public let workers: Int
    public let backlog: Int
    public let linger: Double
    private let name: String
    private let work: @Sendable (Item) -> Void
    private let line: ConditionLock<Line>

    private struct Line {
        var items: [Item] = []
        var closed = false
        /// Workers alive, and of them those waiting for an item.
        var running = 0
        var idle = 0
    }

    private enum Taken { case item(Item), done }

    public init(workers: Int, backlog: Int, linger: Double = 5, name: String, work: @escaping @Sendable (Item) -> Void) {
        precondition(workers > 0 && backlog > 0)
        self.workers = workers
        self.backlog = backlog
        self.linger = linger
        self.name = name
        self.work = work
        line = ConditionLock(Line())
    }

    /// Workers alive now.
    public var running: Int { line.withLock { $0.running } }

    /// Queues `item`; false (and nothing queued) when `backlog` items wait already or the line is closed.
    public func submit(_ item: Item) -> Bool {
        let (taken, spawn) = line.withLockWakingAll { l -> (Bool, Bool) in
            guard !l.closed, l.items.count < backlog else { return (false, false) }
            l.items.append(item)
            // One more worker only when every one alive is busy with an item of its own.
            guard l.items.count > l.idle, l.running < workers else { return (true, false) }
            l.running += 1
            return (true, true)
        }
        if spawn {
            let t = Thread { [self] in serve() }
            t.name = name
            t.start()
        }
        return taken
    }

    private func serve() {
        while true {
            line.withLock { $0.idle += 1 }
            let taken = line.wait(until: Monotonic.now + linger) { l -> Taken? in
                if !l.items.isEmpty {
                    l.idle -= 1
                    return .item(l.items.removeFirst())
                }
                if l.closed {
                    l.idle -= 1
                    return .done
                }
                return nil
            }
            if case .item(let item)? = taken {
                work(item)
                continue
            }
            if case .done? = taken { break }
            // `linger` passed without work: this worker ends, unless an item came in between.
            // Decided with `running` in one step, so a submit never counts a worker that is leaving.
            let ends = line.withLockWakingAll { l -> Bool in
                l.idle -= 1
                guard l.items.isEmpty else { return false }
                l.running -= 1
                return true
            }
            if ends { return }
        }
        line.withLockWakingAll { $0.running -= 1 }
    }

    /// No more items; returns once what waited is done and every worker has ended.
    public func close() {
        line.withLockWakingAll { $0.closed = true }
        _ = line.wait { l in l.running == 0 ? true : nil }
    }
}
