import AVGraph

/// A `whep` sink's audience changed: viewers watching now and since the start.
public struct WhepViewersEvent: NodeEvent, Equatable {
    public static let eventName = "viewers"
    public static let summary = "A whep sink's WebRTC viewers: how many watch now, how many have watched, and the last one's wait for its first picture."
    public static var fields: [EventField] {
        [.integer("watching", doc: "viewers connected now"),
         .integer("served", doc: "viewers that have connected since the start"),
         .number("first_picture_seconds", minimum: 0, required: false, doc: "the newest viewer's wait from its offer to its first picture (a keyframe)")]
    }
    public static var example: Self { Self(watching: 3, served: 5, firstPictureSeconds: 0.42) }

    public var watching: Int
    public var served: Int
    public var firstPictureSeconds: Double?
    enum CodingKeys: String, CodingKey { case watching, served, firstPictureSeconds = "first_picture_seconds" }
    public init(watching: Int, served: Int, firstPictureSeconds: Double?) {
        self.watching = watching
        self.served = served
        self.firstPictureSeconds = firstPictureSeconds
    }

    public var text: String {
        "\(watching) watching, \(served) served" + (firstPictureSeconds.map { String(format: ", the newest saw its first picture %.2f s after its offer", $0) } ?? "")
    }
}
