import AVGraph
import CFFmpeg

/// A synthetic phone screen: scrolling cards, a status bar with the frame number in binary,
/// a moving dot, and a bright marker in the top-left corner of the upright picture (the other
/// three corners stay dark and still), so a test can read the orientation from the corners.
/// It draws the upright picture straight into the buffer as that picture would be stored under
/// the scheduled orientation tag, as a phone's screen capture delivers it.
final class TestsrcNode: Source, Node {
    static let typeName = "testsrc"
    static let summary = "synthetic phone screen (moving UI-like content, frame counter, orientation marker)"
    static let outputs = [PadSpec("video", [.rawVideo], doc: "raw pictures, pts in 1/rate")]
    static let size = Setting.size("size", default: "1170x2532",
                                   doc: "buffer size (a portrait phone screen); turned tags make the upright picture landscape")
    static let rate = Setting.rate("rate", 0.1...240, default: "30", doc: "frames per second")
    static let format = Setting.choice("format", default: PictureFormat.nv12, doc: "pixel format")
    static let duration = Setting<Double?>.duration("duration", 0.001...1e7,
                                                    doc: "stop after this much media time (none: endless, or the pipeline's duration)")
    static let orientation = Setting.orientationSchedule("orientation", default: "up",
        doc: "orientation tag of the buffers: a value, or a schedule [{at: 0s, value: up}, {at: 10s, value: left}]")
    static let stalls = Setting.spans("stalls", doc: "spans [{at: 5s, for: 2s}] with no frames at all, as a still screen delivers none")
    static let options = [size.spec, rate.spec, format.spec, duration.spec, orientation.spec, stalls.spec]

    enum PictureFormat: String, CaseIterable, Sendable { case nv12, yuv420p }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let size = n[Self.size]
        guard size.width >= 2, size.height >= 2 else { throw NegotiationError("size must be at least 2x2", option: "size") }
        // The buffer keeps its size whatever the tag says; only `orient` changes the dims.
        var f = StreamFormat.video(width: size.width, height: size.height, pixelFormat: n[Self.format].rawValue, frameRate: n[Self.rate])
        f.tagged = n[Self.orientation].contains { $0.value != .up }
        return [f]
    }

    let width: Int, height: Int
    let rate: Rational
    let layout: PixelLayout
    let pool: VideoFramePool
    let schedule: [OrientationChange]
    let stalls: [TimeSpan]
    let endTime: Double?
    var index: Int64 = 0

    init(_ setup: NodeSetup) throws {
        let f = setup.outputs[0]
        width = f.width
        height = f.height
        rate = f.frameRate
        guard let l = PixelLayout(f.pixelFormat) else { throw MediaError("unknown pixel format '\(f.pixelFormat)'") }
        layout = l
        pool = try VideoFramePool(width: width, height: height, pixelFormat: l.format)
        schedule = setup[Self.orientation]
        stalls = setup[Self.stalls]
        endTime = setup.duration
    }

    override func produce(_ out: Outlet) throws -> Bool {
        var t = seconds(index)
        while stalls.contains(where: { $0.contains(t) }) {
            if let end = endTime, t >= end - 1e-9 { return false }
            index += 1
            t = seconds(index)
        }
        if let end = endTime, t >= end - 1e-9 { return false }
        let tag = schedule.orientation(at: t)
        let frame = try pool.frame(timeBase: rate.inverse, orientation: tag)
        frame.pts = index
        frame.av.pointee.pkt_duration = 1
        frame.tagBT709Limited()
        Screen(frame: frame, layout: layout, map: tag.storage, upright: tag.uprightSize(width: width, height: height))
            .draw(frameNumber: Int(index))
        out.emit(frame)
        index += 1
        return !out.reachedEnd
    }

    func seconds(_ i: Int64) -> Double { Double(i) * rate.inverse.double }
}

/// Draws the upright screen in rectangles, each mapped to where the tag stores it.
private struct Screen {
    let frame: Frame
    let layout: PixelLayout
    let map: StorageMap
    let upright: (width: Int, height: Int)

    func rect(_ x: Int, _ y: Int, _ w: Int, _ h: Int, _ luma: Int, _ u: Int = 128, _ v: Int = 128) {
        let r = PixelRect(x: x, y: y, width: w, height: h).clipped(to: upright.width, upright.height)
        guard !r.isEmpty else { return }
        let b = map.bufferRect(r, bufferWidth: frame.width, bufferHeight: frame.height)
        frame.fill(b, with: layout.elements(UInt8(clamping: luma), UInt8(clamping: u), UInt8(clamping: v)), layout: layout)
    }

    func draw(frameNumber n: Int) {
        let W = upright.width, H = upright.height
        // Corner blocks: side a fifth of the short edge; only the top-left one is bright.
        let side = max(2, min(W, H) / 5) & ~1
        rect(0, 0, W, H, 28)
        rect(0, 0, side, side, 235)

        // Status bar between the top corners: the frame number, 16 bits, most significant first.
        let barWidth = W - 2 * side
        if barWidth >= 16 {
            let cell = barWidth / 16
            for bit in 0..<16 {
                let on = (n >> (15 - bit)) & 1 == 1
                rect(side + bit * cell, side / 4, cell - max(1, cell / 8), max(1, side / 2), on ? 200 : 70)
            }
        }

        // A feed of cards scrolling up between the top and bottom corner rows.
        let top = side, bottom = H - side
        guard bottom > top else { return }
        let cardHeight = max(4, H / 10) & ~1
        let gap = max(2, cardHeight / 4) & ~1
        let period = cardHeight + gap
        let speed = max(1, H / 300)
        let scrolled = n * speed
        let first = scrolled / period
        let offset = scrolled % period
        let margin = max(1, W / 24)
        var k = 0
        while true {
            let y = top + k * period - offset
            if y >= bottom { break }
            let card = first + k
            let y0 = max(y, top), y1 = min(y + cardHeight, bottom)
            if y1 > y0 {
                let luma = 90 + (card * 53) % 110
                rect(margin, y0, W - 2 * margin, y1 - y0, luma, 128 + (card * 29) % 61 - 30, 128 + (card * 41) % 61 - 30)
                // An avatar and a line of "text" inside the card.
                let avatar = cardHeight * 2 / 3
                let ay = y + (cardHeight - avatar) / 2
                let ay0 = max(ay, y0), ay1 = min(ay + avatar, y1)
                if ay1 > ay0 {
                    rect(margin * 2, ay0, avatar, ay1 - ay0, 220 - luma / 2, 160, 100)
                }
                let ty = y + cardHeight / 3, th = max(1, cardHeight / 6)
                let ty0 = max(ty, y0), ty1 = min(ty + th, y1)
                if ty1 > ty0 {
                    let length = (W - 4 * margin - avatar) * (40 + (card * 17) % 60) / 100
                    rect(margin * 3 + avatar, ty0, length, ty1 - ty0, 235 - luma / 3)
                }
            }
            k += 1
        }

        // A dot sliding along the bottom bar between the bottom corners.
        let track = W - 3 * side
        if track > 0 {
            let x = side + (n * max(1, W / 120)) % track
            rect(x, H - side + side / 4, side, side / 2, 180, 90, 170)
        }
    }
}

extension TestsrcNode: EndsByItself {
    public static func mediaDuration(_ options: OptionValues) -> Double? { options[duration] }
}
