import CFFmpeg
import Foundation

/// X11 screen capture through libavdevice's `x11grab` input (XCB, with shared memory when the
/// server offers it). Each read waits for the next tick of the frame rate (x11grab paces itself)
/// and returns the picture as a frame over the grabbed buffer: nothing is copied here.
public final class ScreenGrabber {
    public struct Region: Sendable, Equatable {
        public var x: Int, y: Int, width: Int, height: Int
        public init(x: Int, y: Int, width: Int, height: Int) {
            self.x = x; self.y = y; self.width = width; self.height = height
        }
        public var description: String { "\(x),\(y),\(width)x\(height)" }
    }

    public let display: String
    public let width: Int
    public let height: Int
    public let pixelFormat: AVPixelFormat
    /// Time base of the frames' pts (x11grab stamps pictures in microseconds of the wall clock).
    public let timeBase: Rational
    private let context: UnsafeMutablePointer<AVFormatContext>
    private let packet: UnsafeMutablePointer<AVPacket>
    private var firstPts: Int64?
    private let watch: DisplayWatch?
    private var lastWatch = Date()

    /// libavdevice, loaded the first time a screen is wanted (see shim.h for why it is not linked),
    /// and its devices registered with libavformat. False when the library is not installed.
    private static let registered: Bool = {
        typealias RegisterAll = @convention(c) () -> Void
        guard let lib = dlopen("libavdevice.so.\(avg_avdevice_major())", RTLD_NOW | RTLD_GLOBAL),
              let register = dlsym(lib, "avdevice_register_all") else { return false }
        unsafeBitCast(register, to: RegisterAll.self)()
        return true
    }()

    private static func inputFormat() -> UnsafePointer<AVInputFormat>? {
        guard registered else { return nil }
        return av_find_input_format("x11grab")
    }

    /// Whether this FFmpeg's libavdevice was built with the x11grab input.
    public static var isAvailable: Bool { inputFormat() != nil }

    /// `DISPLAY` of the environment, else `:0`.
    public static var defaultDisplay: String {
        let d = ProcessInfo.processInfo.environment["DISPLAY"] ?? ""
        return d.isEmpty ? ":0" : d
    }

    /// Opens `display` (`:0`, `:99.0`, `host:1`); `region` nil grabs the whole screen.
    public init(display: String, region: Region?, rate: Rational, drawMouse: Bool) throws {
        guard let format = Self.inputFormat() else {
            throw MediaError("no x11grab input: libavdevice.so.\(avg_avdevice_major()) is not installed or was built without XCB, so the screen cannot be captured")
        }
        self.display = display
        var options: OpaquePointer?
        av_dict_set(&options, "framerate", "\(rate.num)/\(rate.den)", 0)
        av_dict_set(&options, "draw_mouse", drawMouse ? "1" : "0", 0)
        if let r = region {
            av_dict_set(&options, "video_size", "\(r.width)x\(r.height)", 0)
            av_dict_set(&options, "grab_x", "\(r.x)", 0)
            av_dict_set(&options, "grab_y", "\(r.y)", 0)
        }
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        // x11grab logs its own account of a failure; ours below names the display and the region.
        let level = av_log_get_level()
        av_log_set_level(AV_LOG_QUIET)
        let code = avformat_open_input(&ctx, display, format, &options)
        av_log_set_level(level)
        av_dict_free(&options)
        guard code >= 0, let ctx else {
            throw Self.openFailure(code, display: display, region: region)
        }
        guard ctx.pointee.nb_streams >= 1, let par = ctx.pointee.streams[0]?.pointee.codecpar,
              par.pointee.width > 0, par.pointee.height > 0 else {
            var c: UnsafeMutablePointer<AVFormatContext>? = ctx
            avformat_close_input(&c)
            throw MediaError("X display '\(display)' gave no picture stream")
        }
        context = ctx
        width = Int(par.pointee.width)
        height = Int(par.pointee.height)
        pixelFormat = AVPixelFormat(rawValue: par.pointee.format)
        timeBase = Rational(ctx.pointee.streams[0]!.pointee.time_base)
        packet = av_packet_alloc()!
        watch = DisplayWatch(display: display)
    }

    deinit {
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
        var c: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&c)
    }

    private static func openFailure(_ code: Int32, display: String, region: Region?) -> MediaError {
        if code == avg_averror(EIO) || code == avg_averror(ENOENT) || code == avg_averror(ECONNREFUSED) {
            return MediaError("cannot open X display '\(display)' (\(AVFailure.message(code))): is an X server running there, "
                              + "and may this user connect to it? Check the node's display option, DISPLAY and XAUTHORITY")
        }
        if let region, code == avg_averror(EINVAL) {
            // x11grab refuses a region that does not lie inside the screen; say how big the screen is.
            if let size = try? screenSize(display: display) {
                if region.x + region.width > size.width || region.y + region.height > size.height {
                    return MediaError("region \(region.description) lies outside the screen of X display '\(display)' "
                                      + "(\(size.width)x\(size.height)): x + width must be at most \(size.width) and y + height at most \(size.height)")
                }
            }
            return MediaError("X display '\(display)' cannot capture region \(region.description) (\(AVFailure.message(code)))")
        }
        return MediaError("cannot capture X display '\(display)': \(AVFailure.message(code))")
    }

    /// The size of `display`'s screen (opens it briefly).
    public static func screenSize(display: String) throws -> (width: Int, height: Int) {
        let g = try ScreenGrabber(display: display, region: nil, rate: Rational(1, 1), drawMouse: false)
        return (g.width, g.height)
    }

    /// The next picture, waiting for its tick; pts in `timeBase`, counted from the first picture.
    /// The frame shares the grabbed buffer (x11grab's shared-memory pool takes it back when released).
    public func next() throws -> Frame {
        av_packet_unref(packet)
        // The context is blocking (no AVFMT_FLAG_NONBLOCK): x11grab itself waits for the next
        // tick of `rate`, so a read returns a picture or fails; EAGAIN gets one more read, not a spin.
        var r = av_read_frame(context, packet)
        if r == avg_error_eagain() { r = av_read_frame(context, packet) }
        if r < 0 { throw MediaError("lost X display '\(display)' while capturing: \(AVFailure.message(r))") }
        if let watch, Date().timeIntervalSince(lastWatch) >= 1 {
            lastWatch = Date()
            if !watch.isAlive() { throw MediaError("lost X display '\(display)' while capturing: the X server does not answer any more") }
        }
        try AVFailure.check(av_packet_make_refcounted(packet), "av_packet_make_refcounted")
        let need = av_image_get_buffer_size(pixelFormat, Int32(width), Int32(height), 1)
        guard need > 0, packet.pointee.size >= need, let buf = packet.pointee.buf else {
            throw MediaError("X display '\(display)' gave a picture of \(packet.pointee.size) bytes, expected \(need)")
        }
        guard let ref = av_buffer_ref(buf) else { throw MediaError("out of memory (av_buffer_ref)") }
        let frame = try Frame.picture(over: ref, data: packet.pointee.data, width: width, height: height, format: pixelFormat,
                                      alignment: 1, timeBase: timeBase)
        let av = frame.av
        let pts = packet.pointee.pts != avg_nopts() ? packet.pointee.pts
            : Rational.rescale(Int64(Date().timeIntervalSince1970 * 1e6), from: Rational(1, 1_000_000), to: timeBase)
        if firstPts == nil { firstPts = pts }
        frame.pts = pts - firstPts!
        av.pointee.color_range = AVCOL_RANGE_JPEG
        av.pointee.colorspace = AVCOL_SPC_RGB
        av.pointee.color_primaries = AVCOL_PRI_BT709
        av.pointee.color_trc = AVCOL_TRC_IEC61966_2_1
        return frame
    }
}

/// Whether an X server still answers, on a second connection of its own. x11grab alone does not
/// notice a server that went away when it has no pointer to draw: its shared-memory grab then
/// keeps returning the last picture. libxcb is already in the process (x11grab is built on it),
/// so its few functions are looked up at run time rather than linked.
private final class DisplayWatch {
    private typealias Connect = @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<Int32>?) -> OpaquePointer?
    private typealias HasError = @convention(c) (OpaquePointer?) -> Int32
    private typealias Disconnect = @convention(c) (OpaquePointer?) -> Void
    /// `xcb_get_input_focus`: the cookie is a struct of one `unsigned int`, passed as one.
    private typealias Request = @convention(c) (OpaquePointer?) -> UInt32
    private typealias Reply = @convention(c) (OpaquePointer?, UInt32, UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> UnsafeMutableRawPointer?

    private let connection: OpaquePointer
    private let hasError: HasError
    private let disconnect: Disconnect
    private let request: Request
    private let reply: Reply

    init?(display: String) {
        guard let lib = dlopen("libxcb.so.1", RTLD_LAZY),
              let c = dlsym(lib, "xcb_connect"), let h = dlsym(lib, "xcb_connection_has_error"),
              let d = dlsym(lib, "xcb_disconnect"), let q = dlsym(lib, "xcb_get_input_focus"),
              let r = dlsym(lib, "xcb_get_input_focus_reply") else { return nil }
        hasError = unsafeBitCast(h, to: HasError.self)
        disconnect = unsafeBitCast(d, to: Disconnect.self)
        request = unsafeBitCast(q, to: Request.self)
        reply = unsafeBitCast(r, to: Reply.self)
        guard let conn = unsafeBitCast(c, to: Connect.self)(display, nil) else { return nil }
        if hasError(conn) != 0 {
            disconnect(conn)
            return nil
        }
        connection = conn
    }

    deinit { disconnect(connection) }

    /// One round trip to the server.
    func isAlive() -> Bool {
        if hasError(connection) != 0 { return false }
        var error: UnsafeMutableRawPointer?
        let answer = reply(connection, request(connection), &error)
        free(answer)
        free(error)
        return answer != nil || (error != nil && hasError(connection) == 0)
    }
}
