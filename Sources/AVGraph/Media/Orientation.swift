/// The eight EXIF / CGImagePropertyOrientation values: where the stored picture's first row
/// appears when shown upright. `right` (EXIF 6, a phone's portrait buffer of a screen turned
/// one way) is shown by turning the buffer 90° clockwise, `left` (EXIF 8) 90° counter-clockwise.
/// The pixel-level definition lives in one place: `Orientation.storage` (OrientationMapping.swift).
public enum Orientation: String, Sendable, CaseIterable {
    case up, down, left, right
    case upMirrored = "up-mirrored"
    case downMirrored = "down-mirrored"
    case leftMirrored = "left-mirrored"
    case rightMirrored = "right-mirrored"

    /// Whether making it upright swaps width and height.
    public var swapsAxes: Bool {
        switch self {
        case .left, .right, .leftMirrored, .rightMirrored: return true
        default: return false
        }
    }
}
