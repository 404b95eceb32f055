import AVGraph
import CFFmpeg

/// Stands each picture upright from its orientation tag (the one convention of
/// OrientationMapping.swift). Upright pictures pass through as the same reference; turned ones
/// are rewritten once into a pooled picture of the upright size. When everything it feeds stands
/// pictures upright itself (a `resize`), the turn is left to it: the frame goes on with its tag,
/// and the turn happens after scaling, on a picture a fraction of the size. When every node the
/// pictures reach carries the tag to the viewer as a display matrix (an `h264 passthrough: auto`
/// into an MP4 file), nothing is turned: the pictures go on as sent (`KeptOrientation`).
final class OrientNode: Filter, Node {
    static let typeName = "orient"
    static let summary = "upright picture from each frame's orientation tag"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo], doc: "upright pictures (tag up); size changes when the tag turns the picture. When every node they reach carries the tag as a display matrix (h264 passthrough: auto into an MP4/MOV file), the pictures as they came, the first picture's tag kept for the run (check notes which)")]
    static let override = Setting.orientation("override", doc: "ignore the frames' tags and treat every frame as carrying this one")
    static let options = [override.spec]
    static func orientationHandling(input: Int, options: OptionValues) -> OrientationHandling { .turns }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard var f = n.format(on: "video") else { throw NegotiationError("input 'video' is not connected") }
        guard let layout = PixelLayout(f.pixelFormat), layout.canTurn else {
            throw NegotiationError("cannot turn \(f.pixelFormat) pictures", hint: "use nv12, yuv420p, yuv444p, gray or rgba, e.g. with a resize before")
        }
        f.tagged = false
        if let o = n[Self.override] {
            if o.swapsAxes { swap(&f.width, &f.height) }
        } else {
            // Tags can change mid-stream (a phone turned while recording).
            f.sizeVaries = true
        }
        return [f]
    }

    let override: Orientation?
    let consumersTurn: Bool
    let hidden: [TimeSpan]
    /// The tag is carried as a display matrix: pictures go on unturned (nil: they are turned).
    var carried: KeptOrientation?
    var pool: VideoFramePool?
    var layouts: [Int32: PixelLayout] = [:]

    init(_ setup: NodeSetup) throws {
        override = setup[Self.override]
        consumersTurn = setup.consumersStandUpright.first ?? false
        hidden = setup.consumersHide.first ?? []
        // `override` sizes the output upright at negotiation, so its pictures are turned to match.
        if override == nil && setup.orientationCarried.first == true { carried = KeptOrientation() }
    }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        let tag = override ?? frame.orientation
        if carried != nil {
            out.emit(try carried!.picture(frame, tag: tag, out))
            return
        }
        if tag == .up {
            frame.orientation = .up
            out.emit(frame)
            return
        }
        if consumersTurn {
            frame.orientation = tag
            out.emit(frame)
            return
        }
        let layout = try layout(of: frame)
        let size = tag.uprightSize(width: frame.width, height: frame.height)
        if pool?.matches(width: size.width, height: size.height, pixelFormat: layout.format) != true {
            pool = try VideoFramePool(width: size.width, height: size.height, pixelFormat: layout.format)
        }
        let upright = try pool!.frame(timeBase: frame.timeBase)
        upright.copyProperties(from: frame)
        if hidden.covers(frame.seconds) {
            // The consumers replace this picture unseen (a scheduled privacy card): black, not turned.
            upright.fill(PixelRect(x: 0, y: 0, width: size.width, height: size.height), with: layout.elements(for: RGB(r: 0, g: 0, b: 0)), layout: layout)
        } else {
            PictureTurn.upright(frame, into: upright, map: tag.storage, layout: layout)
        }
        out.emit(upright)
    }

    private func layout(of frame: Frame) throws -> PixelLayout {
        let key = frame.av.pointee.format
        if let l = layouts[key] { return l }
        guard let l = PixelLayout(frame.pixelFormat), l.canTurn else { throw MediaError("cannot turn pictures of pixel format \(key)") }
        layouts[key] = l
        return l
    }
}
