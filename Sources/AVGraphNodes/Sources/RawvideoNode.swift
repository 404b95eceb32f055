import AVGraph
import CFFmpeg
import Foundation

/// Raw pictures from a file (what `ffmpeg -f rawvideo` writes). The file is mapped (MAP_PRIVATE)
/// and each picture is a frame over its bytes in the mapping: nothing is read or copied, the
/// pages come from the page cache as swscale touches them, and when the frame is released its
/// pages are dropped from the process again (MADV_DONTNEED), so a long file looped costs one or
/// two pictures of resident memory, none of it anonymous. Where the file cannot be mapped, each
/// frame is read() into a pooled picture instead.
///
/// A file truncated while it is mapped makes any later access to a vanished page raise SIGBUS,
/// on whichever thread touches the picture (the scaler, the encoder). The mapping is guarded:
/// such an access reads zeros instead (see avg_mapping_guard in shim.h), and the next picture
/// ends the run with an error naming the node, as does a size check (fstat) before each
/// picture and a file replaced or removed under its path. Reading into pooled pictures instead
/// would copy every picture (4.4 MB for a phone screen) and keep them resident.
final class RawvideoNode: Source, Node {
    static let typeName = "rawvideo"
    static let summary = "raw pictures from a file"
    static let outputs = [PadSpec("video", [.rawVideo], doc: "raw pictures, pts in 1/rate")]
    static let path = Setting.path("path", mustExist: true, required: true, doc: "file of raw pictures, one after the other")
    static let size = Setting<PictureSize?>.size("size", required: true, doc: "picture size in the file")
    static let format = Setting.string("format", default: "yuv420p", doc: "FFmpeg pixel format name of the file (nv12, yuv420p, gray, rgba...)")
    static let rate = Setting.rate("rate", 0.1...240, default: "30", doc: "frames per second")
    static let loop = Setting.loop("loop", doc: "false: play once; true: forever; a number: that many plays")
    static let duration = Setting<Double?>.duration("duration", 0.001...1e7, doc: "stop after this much media time")
    static let orientation = Setting.orientationSchedule("orientation", default: "up",
        doc: "orientation tag to put on the pictures: a value, or a schedule [{at: 0s, value: up}, {at: 10s, value: left}]")
    static let options = [path.spec, size.spec, format.spec, rate.spec, loop.spec, duration.spec, orientation.spec]

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let size = n[Self.size] else { throw NegotiationError("missing size", option: "size", hint: "write size: 1170x2532") }
        let name = n[Self.format]
        guard let format = PixelLayout.format(named: name), PixelLayout(format) != nil else {
            throw NegotiationError("unknown or unsupported pixel format '\(name)'", option: "format", hint: "use nv12, yuv420p, gray, rgba...")
        }
        let frameSize = Int(av_image_get_buffer_size(format, Int32(size.width), Int32(size.height), 1))
        guard frameSize > 0 else { throw NegotiationError("size \(size.width)x\(size.height) does not fit \(name)", option: "size") }
        if let path = n.path(Self.path) {
            let shown = n[Self.path] ?? path
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                  let bytes = (attributes[.size] as? NSNumber)?.intValue else {
                throw NegotiationError("cannot read '\(shown)'", option: "path")
            }
            guard bytes > 0, bytes % frameSize == 0 else {
                throw NegotiationError("'\(shown)' holds \(bytes) bytes, not a whole number of \(size.width)x\(size.height) \(name) frames (\(frameSize) bytes each)",
                                       option: "path", hint: "check size and format")
            }
        }
        let rate = n[Self.rate]
        var f = StreamFormat.video(width: size.width, height: size.height, pixelFormat: name, frameRate: rate)
        f.tagged = n[Self.orientation].contains { $0.value != .up }
        return [f]
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
    let mapping: MappedFile?
    let frameCount: Int
    var fileFrame = 0

    init(_ setup: NodeSetup) throws {
        let f = setup.outputs[0]
        rate = f.frameRate
        pool = try VideoFramePool(width: f.width, height: f.height, pixelFormat: f.pixelFormat, alignment: 1)
        guard let p = setup.path(Self.path) else { throw MediaError("missing path") }
        path = p
        fd = open(p, O_RDONLY)
        guard fd >= 0 else { throw MediaError("cannot open '\(p)': \(String(cString: strerror(errno)))") }
        plays = setup[Self.loop]
        var st = stat()
        let fileSize = fstat(fd, &st) == 0 ? Int(st.st_size) : 0
        frameCount = pool.pictureSize > 0 ? fileSize / pool.pictureSize : 0
        mapping = frameCount > 0 ? MappedFile(fd: fd, length: frameCount * pool.pictureSize, pictureSize: pool.pictureSize) : nil
        schedule = setup[Self.orientation]
        endTime = setup.duration
    }

    deinit { close(fd) }

    override func produce(_ out: Outlet) throws -> Bool {
        let t = Double(index) * rate.inverse.double
        if let end = endTime, t >= end - 1e-9 { return false }
        if let m = mapping {
            if fileFrame >= frameCount {
                played += 1
                if plays >= 0 && played >= plays { return false }
                fileFrame = 0
            }
            try checkStillThere(m)
            let frame = try m.frame(offset: fileFrame * pool.pictureSize, size: pool.pictureSize, width: pool.width, height: pool.height,
                                    format: pool.pixelFormat, timeBase: rate.inverse, orientation: schedule.orientation(at: t))
            fileFrame += 1
            return emit(frame, out)
        }
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
        return emit(frame, out)
    }

    /// The file under the mapping must still be whole and the one at the path.
    private func checkStillThere(_ m: MappedFile) throws {
        var st = stat()
        let measured = fstat(fd, &st) == 0
        guard !m.vanished, measured, Int(st.st_size) >= m.length else {
            throw MediaError("'\(path)' was truncated while playing (now \(st.st_size) bytes, was \(m.length))")
        }
        var now = stat()
        guard stat(path, &now) == 0, now.st_ino == st.st_ino, now.st_dev == st.st_dev else {
            throw MediaError("'\(path)' was replaced or removed while playing")
        }
    }

    private func emit(_ frame: Frame, _ out: Outlet) -> Bool {
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

/// A whole file mapped read-only-shared-nothing (MAP_PRIVATE), followed by one zero page so the
/// SIMD readers in swscale may run a little past the last picture's end, as over FFmpeg's
/// padded buffers. Frames over it hold a reference each; the mapping goes when the last does.
// @unchecked: the mapping's base pointer is not Sendable; every field is set once, and the last frame over it unmaps it, on whatever thread.
final class MappedFile: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let length: Int
    /// Bytes of one picture: what each frame's buffer spans.
    let pictureSize: Int
    private let reserved: Int
    /// The guard slot (-1: unguarded, as when 64 mappings are guarded already).
    private let guardSlot: Int32
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    init?(fd: Int32, length: Int, pictureSize: Int) {
        self.pictureSize = pictureSize
        let page = Self.pageSize
        let mapped = (length + page - 1) / page * page
        reserved = mapped + page
        // Reserve the file's pages plus a zero page, then lay the file over the front.
        guard let area = mmap(nil, reserved, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), area != MAP_FAILED else { return nil }
        guard let file = mmap(area, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0), file == area else {
            munmap(area, reserved)
            return nil
        }
        madvise(area, length, MADV_SEQUENTIAL)
        base = area
        self.length = length
        guardSlot = avg_mapping_guard(area, mapped)
    }

    deinit {
        avg_mapping_unguard(guardSlot)
        munmap(base, reserved)
    }

    /// Whether a picture touched a page the file no longer has (it read zeros).
    var vanished: Bool { avg_mapping_hit(guardSlot) != 0 }

    /// A frame over `size` bytes at `offset` (tight lines, the file's layout). Writable in the
    /// sense of copy-on-write: a node that draws into it changes its own private pages only.
    func frame(offset: Int, size: Int, width: Int, height: Int, format: AVPixelFormat, timeBase: Rational,
               orientation: Orientation) throws -> Frame {
        let data = (base + offset).assumingMemoryBound(to: UInt8.self)
        let opaque = Unmanaged.passRetained(self).toOpaque()
        guard let buf = av_buffer_create(data, size, { opaque, data in
            guard let opaque, let data else { return }
            let file = Unmanaged<MappedFile>.fromOpaque(opaque).takeRetainedValue()
            file.release(UnsafeMutableRawPointer(data))
        }, opaque, 0) else {
            Unmanaged<MappedFile>.fromOpaque(opaque).release()
            throw MediaError("out of memory (av_buffer_create)")
        }
        return try Frame.picture(over: buf, data: data, width: width, height: height, format: format,
                                 alignment: 1, timeBase: timeBase, orientation: orientation)
    }

    /// A picture is done with: its whole pages leave the process (they come back from the page
    /// cache if the file loops). Pages shared with the neighbouring pictures stay.
    private func release(_ data: UnsafeMutableRawPointer) {
        let page = Self.pageSize
        let start = Int(bitPattern: data), end = start + pictureSize
        let lo = (start + page - 1) / page * page, hi = end / page * page
        if hi > lo { madvise(UnsafeMutableRawPointer(bitPattern: lo), hi - lo, MADV_DONTNEED) }
    }
}

extension RawvideoNode: EndsByItself {
    public static func mediaDuration(_ options: OptionValues) -> Double? { options[duration] }
}
