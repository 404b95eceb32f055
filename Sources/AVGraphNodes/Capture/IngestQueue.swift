import AVGraph
import Foundation

/// What a full ingest queue does with the next picture: refuse it (`newest`: the push says
/// `dropped`) or make room by dropping the oldest queued one (`oldest`: lowest latency).
public enum IngestDropPolicy: String, Sendable, CaseIterable {
    case newest, oldest
}

/// The bounded hand-over between a producer that must never wait (a sample handler, a socket
/// reader) and the source node's thread. The producer holds the lock only to append a reference;
/// pictures are bounded by count, audio by seconds queued.
final class IngestQueue: @unchecked Sendable {
    struct Item {
        /// 0 video, 1 app audio, 2 mic audio.
        var pad: Int
        var frame: Frame
        /// The producer's timestamp (seconds on its own clock), if it gave one.
        var sourceTime: Double?
        /// Monotonic seconds when the item arrived.
        var arrival: Double
        /// Producer session (a socket connection); a new session gets a new time anchor.
        var session: Int
    }

    private let condition = NSCondition()
    /// Taken slots are set to nil at once: a consumed picture must go back to its pool now.
    private var items: [Item?] = []
    private var head = 0
    private var videoQueued = 0
    private var audioQueued = 0.0
    private var ended = false
    let videoCapacity: Int
    let audioCapacity: Double
    let policy: IngestDropPolicy
    private(set) var droppedVideo = 0
    private(set) var droppedAudio = 0

    init(videoCapacity: Int, audioCapacity: Double, policy: IngestDropPolicy) {
        self.videoCapacity = max(1, videoCapacity)
        self.audioCapacity = max(0.01, audioCapacity)
        self.policy = policy
        items.reserveCapacity(256)
    }

    /// Whether a picture would be taken now (checked before copying it).
    func hasRoomForVideo() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return !ended && (videoQueued < videoCapacity || policy == .oldest)
    }

    func hasRoomForAudio(seconds: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return !ended && audioQueued + seconds <= audioCapacity
    }

    /// Appends `item`; false when it was dropped by policy. Never waits.
    func push(_ item: Item) -> Bool {
        var evicted: Frame?
        condition.lock()
        if ended { condition.unlock(); return false }
        if item.pad == 0 {
            if videoQueued >= videoCapacity {
                guard policy == .oldest, let i = items[head...].firstIndex(where: { $0?.pad == 0 }) else {
                    droppedVideo += 1
                    condition.unlock()
                    return false
                }
                evicted = items.remove(at: i)?.frame
                videoQueued -= 1
                droppedVideo += 1
            }
            videoQueued += 1
        } else {
            let seconds = Self.seconds(item.frame)
            if audioQueued + seconds > audioCapacity {
                droppedAudio += 1
                condition.unlock()
                return false
            }
            audioQueued += seconds
        }
        items.append(item)
        condition.signal()
        condition.unlock()
        _ = evicted  // released outside the lock
        return true
    }

    /// A buffer refused before it was copied (no room) still counts as a drop.
    func noteDropped(pad: Int) {
        condition.lock()
        if pad == 0 { droppedVideo += 1 } else { droppedAudio += 1 }
        condition.unlock()
    }

    /// The producer is done: the node ends once the queue is empty.
    func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    enum Next { case item(Item), timeout, ended }

    /// The oldest item, waiting at most `timeout` seconds.
    func next(timeout: Double) -> Next {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while head == items.count {
            if ended { return .ended }
            if !condition.wait(until: deadline) { return head == items.count ? (ended ? .ended : .timeout) : take() }
        }
        return take()
    }

    private func take() -> Next {
        let item = items[head]!
        items[head] = nil
        head += 1
        if head > 64 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        if item.pad == 0 { videoQueued -= 1 } else { audioQueued = max(0, audioQueued - Self.seconds(item.frame)) }
        return .item(item)
    }

    var counts: (video: Int, audio: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (droppedVideo, droppedAudio)
    }

    static func seconds(_ f: Frame) -> Double { f.sampleRate > 0 ? Double(f.sampleCount) / Double(f.sampleRate) : 0 }
}

/// Monotonic seconds (CLOCK_MONOTONIC), cheap and never jumping.
enum Monotonic {
    static var now: Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
    }
}
