import AVGraph
import CFFmpeg
import Foundation

/// Raw pictures from a file (what `ffmpeg -f rawvideo` writes): each frame is read with one
/// read() straight into a pooled picture whose layout is the file's (tight lines), so the bytes
/// go from the page cache to the frame without passing through Swift.
final class RawvideoNode: Node, @unchecked Sendable {
    static let typeName = "rawvideo"
    static let summary = "raw pictures from a file"
    static let outputs = [PadSpec("video", [.rawVideo], doc: "raw pictures, pts in 1/rate")]
    static let options: [OptionSpec] = [
        OptionSpec("path", .path(mustExist: true), required: true, doc: "file of raw pictures, one after the other"),
        OptionSpec("size", .size, required: true, doc: "picture size in the file"),
        OptionSpec("format", .string, default: "yuv420p", doc: "FFmpeg pixel format name of the file (nv12, yuv420p, gray, rgba...)"),
        OptionSpec("rate", .rate(0.1...240), default: "30", doc: "frames per second"),
        OptionSpec("loop", .loop, default: "false", doc: "false: play once; true: forever; a number: that many plays"),
        OptionSpec("duration", .duration(0.001...1e7), doc: "stop after this much media time"),
        OptionSpec("orientation", .orientationSchedule, default: "up",
                   doc: "orientation tag to put on the pictures: a value, or a schedule [{at: 0s, value: up}, {at: 10s, value: left}]"),
    ]

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let size = n.options.size("size") else { throw NegotiationError("missing size", option: "size", hint: "write size: 1170x2532") }
        let name = n.options.string("format") ?? "yuv420p"
        guard let format = PixelLayout.format(named: name), PixelLayout(format) != nil else {
            throw NegotiationError("unknown or unsupported pixel format '\(name)'", option: "format", hint: "use nv12, yuv420p, gray, rgba...")
        }
        let frameSize = Int(av_image_get_buffer_size(format, Int32(size.width), Int32(size.height), 1))
        guard frameSize > 0 else { throw NegotiationError("size \(size.width)x\(size.height) does not fit \(name)", option: "size") }
        if let path = n.path("path") {
            let shown = n.options.string("path") ?? path
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                  let bytes = (attributes[.size] as? NSNumber)?.intValue else {
                throw NegotiationError("cannot read '\(shown)'", option: "path")
            }
            guard bytes > 0, bytes % frameSize == 0 else {
                throw NegotiationError("'\(shown)' holds \(bytes) bytes, not a whole number of \(size.width)x\(size.height) \(name) frames (\(frameSize) bytes each)",
                                       option: "path", hint: "check size and format")
            }
        }
        let rate = n.options.rate("rate") ?? Rational(30, 1)
        return [StreamFormat.video(width: size.width, height: size.height, pixelFormat: name, frameRate: rate)]
    }

    let rate: Rational
    let pool: VideoFramePool
    let fd: Int32
    let path: String
    let plays: Int
    let schedule: [OrientationChange]
    let endTime: Double?
    var played = 0
    var index: Int64 = 0

    init(_ setup: NodeSetup) throws {
        let f = setup.outputs[0]
        rate = f.frameRate
        pool = try VideoFramePool(width: f.width, height: f.height, pixelFormat: f.pixelFormat, alignment: 1)
        guard let p = setup.path("path") else { throw MediaError("missing path") }
        path = p
        fd = open(p, O_RDONLY)
        guard fd >= 0 else { throw MediaError("cannot open '\(p)': \(String(cString: strerror(errno)))") }
        plays = setup.options.loop("loop")
        schedule = setup.options.orientationSchedule("orientation")
        endTime = setup.duration
    }

    deinit { close(fd) }

    func produce(_ out: Outlet) throws -> Bool {
        let t = Double(index) * rate.inverse.double
        if let end = endTime, t >= end - 1e-9 { return false }
        let frame = try pool.frame(timeBase: rate.inverse, orientation: schedule.orientation(at: t))
        guard let data = frame.plane(0) else { throw MediaError("empty picture") }
        var got = try readFully(data, pool.pictureSize)
        if got == 0 {
            played += 1
            if plays >= 0 && played >= plays { return false }
            lseek(fd, 0, SEEK_SET)
            got = try readFully(data, pool.pictureSize)
        }
        guard got == pool.pictureSize else { throw MediaError("'\(path)' ends inside a frame (\(got) of \(pool.pictureSize) bytes)") }
        frame.pts = index
        frame.av.pointee.pkt_duration = 1
        frame.tagBT709Limited()
        out.emit(frame)
        index += 1
        return !out.reachedEnd
    }

    private func readFully(_ buffer: UnsafeMutablePointer<UInt8>, _ count: Int) throws -> Int {
        var done = 0
        while done < count {
            let n = read(fd, buffer + done, count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw MediaError("cannot read '\(path)': \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            done += n
        }
        return done
    }
}
