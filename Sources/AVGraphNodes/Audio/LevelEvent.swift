import AVGraph
import Foundation

/// `meter`: RMS and peak per channel (dBFS) of the window ending at `media_time`.
public struct LevelEvent: NodeEvent, Equatable {
    public static let eventName = "level"
    public static let summary = "RMS and peak per channel (dBFS) of the window ending at media_time."
    public static var fields: [EventField] { [.number("media_time"), .list("rms", of: EventField.number()), .list("peak", of: EventField.number())] }
    public static var example: Self { Self(mediaTime: 1, rms: [-20.5, -21], peak: [-3, -4.5]) }
    /// Several a second: shown only with `--log-level debug`, and the first dropped when no one reads.
    public static var severity: Event.Severity { .debug }

    public var mediaTime: Double
    public var rms: [Double]
    public var peak: [Double]
    enum CodingKeys: String, CodingKey { case mediaTime = "media_time", rms, peak }
    public init(mediaTime: Double, rms: [Double], peak: [Double]) { self.mediaTime = mediaTime; self.rms = rms; self.peak = peak }

    public var text: String { "level at \(Event.seconds(mediaTime)): rms \(rms.map { String(format: "%.1f", $0) }.joined(separator: "/")) dBFS" }
}
