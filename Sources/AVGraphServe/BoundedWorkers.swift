import AVGraph
import Foundation

/// A fixed number of threads taking items from a bounded line: what a flood of arrivals costs is
/// at most `backlog` items waiting, never a thread each. Work that blocks (an `--auth` question of
/// up to 2 s, starting a run) holds one worker; the others go on.
public final class BoundedWorkers<Item: Sendable>: Sendable {
    public let workers: Int
    public let backlog: Int
    private let line: ConditionLock<Line>
    private let finished: ConditionLock<Int>

    private struct Line {
        var items: [Item] = []
        var closed = false
    }

    private enum Taken { case item(Item), closed }

    public init(workers: Int, backlog: Int, name: String, work: @escaping @Sendable (Item) -> Void) {
        precondition(workers > 0 && backlog > 0)
        self.workers = workers
        self.backlog = backlog
        line = ConditionLock(Line())
        finished = ConditionLock(0)
        for _ in 0..<workers {
            let t = Thread { [line, finished] in
                while true {
                    let taken = line.wait { l -> Taken? in
                        if !l.items.isEmpty { return .item(l.items.removeFirst()) }
                        return l.closed ? .closed : nil
                    }
                    guard case .item(let item)? = taken else { break }
                    work(item)
                }
                finished.withLockWakingAll { $0 += 1 }
            }
            t.name = name
            t.start()
        }
    }

    /// Queues `item`; false (and nothing queued) when `backlog` items wait already or the line is closed.
    public func submit(_ item: Item) -> Bool {
        line.withLockWakingAll { l in
            guard !l.closed, l.items.count < backlog else { return false }
            l.items.append(item)
            return true
        }
    }

    /// No more items; the workers end once what waits is done. Returns when they have.
    public func close() {
        line.withLockWakingAll { $0.closed = true }
        _ = finished.wait { [workers] n in n == workers ? true : nil }
    }
}
