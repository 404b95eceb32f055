import AVGraph
import CFFmpeg
import Foundation

/// `screen`: a live X11 screen (or a region of it) through libavdevice's x11grab. The grabber
/// paces itself at `rate`; each picture is stamped by the capture clock, rebased so the first
/// one is at 0. Pictures are converted once (swscale) to `format`, or passed on as grabbed
/// (`bgr0`, no copy).
///
/// Without a `region` the whole screen is captured, and its size is only known when the display
/// is opened: `check` cannot know it, so the format rule marks the size as varying (like `orient`)
/// and an encoder then asks for a `resize` first. With a `region`, the size is the region's.
final class ScreenNode: Source, Node, LiveSource {
    static let typeName = "screen"
    static let summary = "live X11 screen capture (x11grab): the whole screen or a region"
    static let outputs = [PadSpec("video", [.rawVideo], doc: "screen pictures, pts in microseconds of the capture clock from the first picture")]
    /// What `check` assumes for a whole screen, whose real size is known only when running.
    static let assumedScreen = (width: 1920, height: 1080)
    static let display = Setting<String?>.string("display", doc: "X display to capture, like :0 or :99.0; default: $DISPLAY, else :0")
    static let region = Setting.value("region", ScreenRegion.self,
        doc: "x,y,WxH: the part of the screen to capture (top-left corner and size); default: the whole screen, "
            + "whose size is known only when running (put a resize before an encoder)")
    static let rate = Setting.rate("rate", 0.1...240, default: "30", doc: "frames per second to grab")
    static let format = Setting.choice("format", default: PictureFormat.nv12,
        doc: "pixel format out: nv12 or yuv420p (converted once, BT.709 limited), or bgr0 as grabbed (no copy)")
    static let mouse = Setting.bool("mouse", default: false, doc: "draw the mouse pointer into the pictures")
    static let duration = Setting<Double?>.duration("duration", 0.001...1e7,
        doc: "stop after this much media time (none: until stopped, or the pipeline's duration)")
    static let options = [display.spec, region.spec, rate.spec, format.spec, mouse.spec, duration.spec]

    enum PictureFormat: String, CaseIterable, Sendable { case nv12, yuv420p, bgr0 }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        if let d = n[Self.display], !d.contains(":") {
            throw NegotiationError("'\(d)' is not an X display name", option: "display", hint: "write it like :0, :99 or host:0.0")
        }
        guard ScreenGrabber.isAvailable else {
            throw NegotiationError("no x11grab input (libavdevice.so.\(avg_avdevice_major()) missing or built without XCB), so the screen cannot be captured",
                                   hint: "install libavdevice\(avg_avdevice_major()) (Debian's is built with XCB)")
        }
        let rate = n[Self.rate]
        let format = n[Self.format].rawValue
        var f: StreamFormat
        if let r = n[Self.region] {
            f = StreamFormat.video(width: r.width, height: r.height, pixelFormat: format, frameRate: rate)
        } else {
            f = StreamFormat.video(width: assumedScreen.width, height: assumedScreen.height, pixelFormat: format, frameRate: rate)
            f.sizeVaries = true
        }
        f.timeBase = Rational(1, 1_000_000)
        return [f]
    }

    let display: String
    let grabber: ScreenGrabber
    let frameDuration: Int64
    let endTime: Double?
    let outputFormat: AVPixelFormat
    let pool: VideoFramePool?
    let scaler: Scaler?

    init(_ setup: NodeSetup) throws {
        display = setup[Self.display] ?? ScreenGrabber.defaultDisplay
        let rate = setup[Self.rate]
        let region = setup[Self.region].map { ScreenGrabber.Region(x: $0.x, y: $0.y, width: $0.width, height: $0.height) }
        grabber = try ScreenGrabber(display: display, region: region, rate: rate, drawMouse: setup[Self.mouse])
        frameDuration = Rational.rescale(1, from: rate.inverse, to: grabber.timeBase)
        endTime = setup.duration
        let name = setup[Self.format].rawValue
        guard let f = PixelLayout.format(named: name) else { throw MediaError("unknown pixel format '\(name)'") }
        outputFormat = f
        if f == grabber.pixelFormat {
            pool = nil
            scaler = nil
        } else {
            pool = try VideoFramePool(width: grabber.width, height: grabber.height, pixelFormat: f)
            // Same size: only the pixel format changes, RGB -> BT.709 limited YUV in one pass.
            scaler = try Scaler(from: grabber.width, grabber.height, grabber.pixelFormat, to: grabber.width, grabber.height, f,
                                quality: .bilinear, sourceFullRange: true)
        }
    }

    override func produce(_ out: Outlet) throws -> Bool {
        let grabbed = try grabber.next()
        if let end = endTime, grabbed.seconds >= end - 1e-9 { return false }
        grabbed.av.pointee.pkt_duration = frameDuration
        let picture: Frame
        if let pool, let scaler {
            picture = try pool.frame(timeBase: grabbed.timeBase)
            picture.copyProperties(from: grabbed)
            let rect = PixelRect(x: 0, y: 0, width: grabber.width, height: grabber.height)
            try scaler.scale(grabbed, rect, into: picture, rect)
            picture.tagBT709Limited()
        } else {
            picture = grabbed
        }
        out.emit(picture)
        return !out.reachedEnd
    }
}

extension ScreenNode: EndsByItself {
    public static func mediaDuration(_ options: OptionValues) -> Double? { options[duration] }
}
