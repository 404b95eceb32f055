/// What flows on an edge. Pads declare which kinds they accept; `check` refuses the rest.
public enum MediaKind: String, Sendable, CaseIterable, CustomStringConvertible {
    case rawVideo = "raw video"
    case rawAudio = "raw audio"
    case encodedVideo = "encoded video"
    case encodedAudio = "encoded audio"

    public var description: String { rawValue }
    public var isVideo: Bool { self == .rawVideo || self == .encodedVideo }
    public var isEncoded: Bool { self == .encodedVideo || self == .encodedAudio }
}
