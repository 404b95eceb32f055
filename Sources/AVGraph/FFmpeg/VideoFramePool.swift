import CFFmpeg

/// Pictures of one geometry from a buffer pool: after the first few frames every `frame()`
/// reuses a buffer a downstream node has released, so memory stays flat; buffers a backlog
/// needed (an encoder that stalled) go back to the system a second or two after it is over
/// (PictureMemory).
/// Each picture is one buffer holding all planes (`av_image_fill_arrays` layout), which lets a
/// raw file be read straight into it when `alignment` is 1.
public final class VideoFramePool {
    public let width: Int
    public let height: Int
    public let pixelFormat: AVPixelFormat
    public let alignment: Int
    /// Bytes of one picture in this pool's layout (without the safety padding).
    public let pictureSize: Int
    private let memory: PictureMemory

    /// SIMD code in swscale may read a little past the last line; FFmpeg pads its own buffers too.
    static let padding = 64

    /// Bytes of one picture laid out with `alignment` (the size every picture pool allocates, less `padding`).
    static func pictureBytes(width: Int, height: Int, pixelFormat: AVPixelFormat, alignment: Int) throws -> Int {
        guard width > 0, height > 0 else { throw MediaError("picture size \(width)x\(height) is empty") }
        let size = av_image_get_buffer_size(pixelFormat, Int32(width), Int32(height), Int32(alignment))
        try AVFailure.check(size, "av_image_get_buffer_size")
        return Int(size)
    }

    public init(width: Int, height: Int, pixelFormat: AVPixelFormat, alignment: Int = 32) throws {
        pictureSize = try Self.pictureBytes(width: width, height: height, pixelFormat: pixelFormat, alignment: alignment)
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.alignment = alignment
        memory = PictureMemory(bytes: pictureSize + Self.padding)
    }

    public convenience init(width: Int, height: Int, pixelFormat name: String, alignment: Int = 32) throws {
        guard let f = PixelLayout.format(named: name) else { throw MediaError("unknown pixel format '\(name)'") }
        try self.init(width: width, height: height, pixelFormat: f, alignment: alignment)
    }

    /// Buffers held now (in use or free).
    public var allocatedBuffers: Int { memory.mappedBlocks }

    public func matches(width: Int, height: Int, pixelFormat: AVPixelFormat) -> Bool {
        self.width == width && self.height == height && self.pixelFormat == pixelFormat
    }

    /// A writable picture (its contents are whatever the buffer last held).
    public func frame(timeBase: Rational, orientation: Orientation = .up) throws -> Frame {
        // Frames still downstream keep `memory` alive until the last of them is released.
        guard let block = memory.reuse() ?? memory.allocate(), let buf = memory.buffer(over: block) else {
            throw MediaError("out of memory for a \(width)x\(height) picture")
        }
        return try Frame.picture(over: buf, data: buf.pointee.data, width: width, height: height, format: pixelFormat,
                                 alignment: alignment, timeBase: timeBase, orientation: orientation)
    }
}

extension Frame {
    /// `av.data` as the pointer array FFmpeg's image functions take.
    public var dataPointers: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?> {
        let offset = MemoryLayout<AVFrame>.offset(of: \AVFrame.data)!
        return (UnsafeMutableRawPointer(av) + offset).assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
    }

    public var lineSizes: UnsafeMutablePointer<Int32> {
        let offset = MemoryLayout<AVFrame>.offset(of: \AVFrame.linesize)!
        return (UnsafeMutableRawPointer(av) + offset).assumingMemoryBound(to: Int32.self)
    }

    public var pixelFormat: AVPixelFormat { AVPixelFormat(rawValue: av.pointee.format) }

    /// The tags of what every video node here writes: BT.709 matrix, primaries and transfer, limited range.
    public func tagBT709Limited() {
        av.pointee.color_range = AVCOL_RANGE_MPEG
        av.pointee.colorspace = AVCOL_SPC_BT709
        av.pointee.color_primaries = AVCOL_PRI_BT709
        av.pointee.color_trc = AVCOL_TRC_BT709
    }

    /// Timing and tags of `other` (pts, duration, color), for a new picture made from it.
    public func copyProperties(from other: Frame) {
        av_frame_copy_props(av, other.av)
        timeBase = other.timeBase
        emittedAt = other.emittedAt
        privacy = other.privacy
    }
}
