import Foundation
import Synchronization

/// What the live sinks fed by one encoder measure of their uplinks, read by that encoder's
/// adaptive bitrate (`h264` `adaptive`). It travels with the encoder's `EncodedStream`, so every
/// sink its packets reach reports to it, however many nodes lie between them. Safe from any thread.
public final class UplinkFeedback: Sendable {
    public struct Reading: Sendable, Equatable {
        /// The sink that measured it.
        public var destination: String
        /// Seconds of media waiting to leave: the sink's queue plus what the socket still holds unsent.
        public var backlog: Double
        /// Video bit/s the link carries now (what it delivers, less the audio), when measured.
        public var carries: Int?
        /// Round trip, seconds, when the transport says.
        public var roundTrip: Double?
        /// When it was measured, `UplinkFeedback.now` seconds.
        public var at: Double

        public init(destination: String, backlog: Double, carries: Int?, roundTrip: Double?, at: Double) {
            self.destination = destination; self.backlog = backlog; self.carries = carries; self.roundTrip = roundTrip; self.at = at
        }
    }

    private let readings = Mutex<[String: Reading]>([:])

    public init() {}

    /// Monotonic seconds (a wall clock that jumps would fake a stall).
    public static var now: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    public func report(_ reading: Reading) {
        readings.withLock { $0[reading.destination] = reading }
    }

    /// A destination that is not connected measures no link: it must not hold the bitrate down.
    public func forget(_ destination: String) {
        _ = readings.withLock { $0.removeValue(forKey: destination) }
    }

    /// Readings no older than `maxAge` seconds, the most backed-up first.
    public func current(now: Double = UplinkFeedback.now, maxAge: Double = 2) -> [Reading] {
        readings.withLock { Array($0.values) }.filter { now - $0.at <= maxAge }.sorted { $0.backlog > $1.backlog }
    }
}
