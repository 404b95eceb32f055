import AVGraph
import Foundation

/// What a full ingest queue does with the next picture: refuse it (`newest`: the push says
/// `dropped`) or make room by dropping the oldest queued one (`oldest`: lowest latency).
public enum IngestDropPolicy: String, Sendable, CaseIterable {
    case newest, oldest
}

/// The bounded hand-over between a producer that must never wait (a sample handler, a socket
/// reader) and the source node's thread: a `HandOff` whose video lane is bounded by pictures
/// (by `policy`) and whose audio lane by seconds queued (a full one refuses the newest).
final class IngestQueue: Sendable {
    struct Item: Sendable {
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

    typealias Next = HandOff<Item>.Next

    let handOff: HandOff<Item>
    let videoCapacity: Int
    let audioCapacity: Double
    let policy: IngestDropPolicy

    init(videoCapacity: Int, audioCapacity: Double, policy: IngestDropPolicy) {
        self.videoCapacity = max(1, videoCapacity)
        self.audioCapacity = max(0.01, audioCapacity)
        self.policy = policy
        handOff = HandOff(bounds: [.init(Double(self.videoCapacity), policy == .oldest ? .dropOldest : .dropNewest),
                                   .init(self.audioCapacity, .dropNewest)],
                          measure: { $0.pad == 0 ? (0, 1) : (1, Self.seconds($0.frame)) })
    }

    /// Whether a picture would be taken now (checked before copying it).
    func hasRoomForVideo() -> Bool { handOff.hasRoom(lane: 0, cost: 1) }

    func hasRoomForAudio(seconds: Double) -> Bool { handOff.hasRoom(lane: 1, cost: seconds) }

    /// Appends `item`; false when it was dropped by policy. Never waits.
    func push(_ item: Item) -> Bool { handOff.push(item) }

    /// A buffer refused before it was copied (no room) still counts as a drop.
    func noteDropped(pad: Int) { handOff.noteDropped(lane: pad == 0 ? 0 : 1) }

    /// The producer is done: the node ends once the queue is empty.
    func end() { handOff.end() }

    /// Wakes the node's thread: a producer came or went, a note waits, the run stops.
    func wake() { handOff.wake() }

    /// The oldest item, waiting for one, the end, a `wake()` or monotonic `deadline`.
    func next(until deadline: Double?) -> Next { handOff.next(until: deadline) }

    /// What is still queued, without waiting (the node is finishing).
    func remaining() -> Item? { handOff.poll() }

    var counts: (video: Int, audio: Int) {
        let d = handOff.drops
        return (d[0], d[1])
    }

    static func seconds(_ f: Frame) -> Double { f.sampleRate > 0 ? Double(f.sampleCount) / Double(f.sampleRate) : 0 }
}
