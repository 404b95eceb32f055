import CFFmpeg

extension Orientation {
    /// The container's 3x3 display matrix for pictures stored with this tag (nil for `up`): what
    /// an MP4 `tkhd` says so that players stand the stored picture up as `orient` would. The
    /// inverse of the file source's reading (`FileProbe.orientation(matrix:)`): FFmpeg 5.1's
    /// av_display_rotation_set(m, a) makes a matrix players (ffmpeg's autorotate) turn a degrees
    /// clockwise; a mirror is a flipped first column.
    public var displayMatrix: [Int32]? {
        let clockwise: Double
        switch self {
        case .up: return nil
        case .upMirrored: clockwise = 0
        case .right, .rightMirrored: clockwise = 90
        case .down, .downMirrored: clockwise = 180
        case .left, .leftMirrored: clockwise = 270
        }
        var m = [Int32](repeating: 0, count: 9)
        av_display_rotation_set(&m, clockwise)
        if self == .upMirrored || self == .leftMirrored || self == .downMirrored || self == .rightMirrored { av_display_matrix_flip(&m, 1, 0) }
        return m
    }

    /// The tag of a picture turned back from upright: what stores an upright picture the way
    /// round a picture with this tag is stored (quarter turns swap, the rest undo themselves).
    public var inverse: Orientation {
        switch self {
        case .left: return .right
        case .right: return .left
        default: return self
        }
    }
}

extension Orientation {
    /// The display matrix FFmpeg 5.1's H.264 decoder makes of a display orientation SEI (read as
    /// a tag with `FileProbe.orientation(matrix:)`): the same as the decoded pictures' side data
    /// (measured: `h264_metadata` rotate=270 decodes to the matrix av_display_rotation_set makes of
    /// -270), then the flips.
    public static func displayMatrix(anticlockwiseDegrees: Double, hflip: Bool, vflip: Bool) -> [Int32] {
        var m = [Int32](repeating: 0, count: 9)
        av_display_rotation_set(&m, -anticlockwiseDegrees)
        av_display_matrix_flip(&m, hflip ? 1 : 0, vflip ? 1 : 0)
        return m
    }
}
