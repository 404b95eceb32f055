/// The eight EXIF / CGImagePropertyOrientation values: how the stored picture must be
/// turned to look upright. `left` means the top of the picture is on its left side, so it is
/// turned 90° clockwise to stand upright.
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
