import CFFmpeg

extension Orientation {
    /// The container's 3x3 display matrix for pictures stored with this tag (nil for `up`): what
    /// an MP4 `tkhd` says so that players stand the stored picture up as `orient` would. The
    /// inverse of the file source's reading (`Orientation(displayMatrix:)`): FFmpeg 5.1's
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
    /// a tag with `Orientation(displayMatrix:)`): the same as the decoded pictures' side data
    /// (measured: `h264_metadata` rotate=270 decodes to the matrix av_display_rotation_set makes of
    /// -270), then the flips.
    public static func displayMatrix(anticlockwiseDegrees: Double, hflip: Bool, vflip: Bool) -> [Int32] {
        var m = [Int32](repeating: 0, count: 9)
        av_display_rotation_set(&m, -anticlockwiseDegrees)
        av_display_matrix_flip(&m, hflip ? 1 : 0, vflip ? 1 : 0)
        return m
    }
}

extension Orientation {
    /// The EXIF orientation of a 3x3 display matrix (stream side data, or a picture's own).
    public init(displayMatrix data: UnsafeRawPointer) {
        self = Self.reading(displayMatrix: data)
    }

    private static func reading(displayMatrix data: UnsafeRawPointer) -> Orientation {
        var m = [Int32](repeating: 0, count: 9)
        for i in 0..<9 { m[i] = data.loadUnaligned(fromByteOffset: 4 * i, as: Int32.self) }
        // A negative determinant is a mirror; undo it (flip the first column) to read the rotation.
        let mirrored = Int64(m[0]) * Int64(m[4]) - Int64(m[1]) * Int64(m[3]) < 0
        if mirrored { m[0] = -m[0]; m[3] = -m[3]; m[6] = -m[6] }
        // Players turn the stored picture clockwise by the negated av_display_rotation_get (ffmpeg's
        // autorotate: 90 is transpose=clock), which is what `right` (EXIF 6) means.
        let ccw = av_display_rotation_get(m)
        guard ccw.isFinite else { return .up }
        var clockwise = Int((-ccw).rounded()) % 360
        if clockwise < 0 { clockwise += 360 }
        switch ((clockwise + 45) / 90 % 4, mirrored) {
        case (1, false): return .right
        case (2, false): return .down
        case (3, false): return .left
        case (0, true): return .upMirrored
        case (1, true): return .rightMirrored
        case (2, true): return .downMirrored
        case (3, true): return .leftMirrored
        default: return .up
        }
    }
}
