import AVGraph

/// The ducker's own event kind: main went down (`on`) or came back, at `media_time`.
public struct DuckingEvent: NodeEvent, Equatable {
    public static let eventName = "ducking"
    public static let summary = "The ducker started lowering main (on: true) or let it come back (on: false) at media_time."
    public static var fields: [EventField] { [.number("media_time"), .boolean("on")] }
    public static var example: Self { Self(mediaTime: 2.02, on: true) }

    public var mediaTime: Double
    public var on: Bool
    enum CodingKeys: String, CodingKey { case mediaTime = "media_time", on }
    public init(mediaTime: Double, on: Bool) { self.mediaTime = mediaTime; self.on = on }

    public var text: String { "\(on ? "ducking" : "back to full level") at \(Event.seconds(mediaTime))" }
}
