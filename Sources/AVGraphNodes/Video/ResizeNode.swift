import AVGraph
import CFFmpeg

/// Scales every picture to one size: `fit` scales straight into the middle of the
/// output picture and paints the bars, `fill` scales a centred crop (source pointers offset, no
/// copy), `stretch` ignores the aspect. Range/matrix become BT.709 limited in the same pass.
/// Pictures still carrying an orientation tag come out upright (`orient` leaves it to us): a
/// quarter-turned 4:2:0 picture is scaled and turned in one pass (TurnScaler); other tagged
/// pictures are scaled by swscale in their stored orientation and only the small result is
/// turned into place.
/// Offline runs resize a picture per core at once (FrameLanes); realtime runs split each picture
/// across the cores instead, so it is done soonest.
final class ResizeNode: Filter, Node {
    static let typeName = "resize"
    static let summary = "scale pictures to one size (fit with bars, fill by cropping, or stretch)"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo], doc: "upright pictures of exactly `size`, BT.709 limited range")]
    static let standsUpright = true
    static let size = Setting<PictureSize?>.size("size", required: true, doc: "output picture size (h264 needs even sizes)")
    static let mode = Setting.choice("mode", default: Placement.Mode.fit,
        doc: "fit: whole picture, bars around it; fill: cover the size, crop the overflow; stretch: ignore the aspect ratio")
    static let background = Setting.color("background", default: "black", doc: "color of the bars in fit mode")
    static let format = Setting.choice("format", default: OutputFormat.yuv420p, doc: "output pixel format")
    static let quality = Setting.choice("quality", default: Scaler.Quality.bicubic, doc: "scaling filter: fast, bilinear, bicubic or lanczos (a quarter-turned 4:2:0 picture is scaled by avgraph's own one-pass kernel, whose fast is bilinear)")
    static let options = [size.spec, mode.spec, background.spec, format.spec, quality.spec]

    enum OutputFormat: String, CaseIterable, Sendable { case yuv420p, nv12, yuv444p, gray }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let input = n.format(on: "video") else { throw NegotiationError("input 'video' is not connected") }
        guard let size = n[Self.size] else { throw NegotiationError("missing size", option: "size", hint: "write size: 1280x720") }
        guard PixelLayout(input.pixelFormat) != nil else { throw NegotiationError("cannot scale \(input.pixelFormat) pictures") }
        var f = StreamFormat.video(width: size.width, height: size.height, pixelFormat: n[Self.format].rawValue, frameRate: input.frameRate)
        f.timeBase = input.timeBase
        f.sizeVaries = false
        return [f]
    }

    struct Geometry: Hashable {
        var width: Int, height: Int, format: Int32, fullRange: Bool, matrix: Int32, orientation: Orientation, chromaLocation: UInt32
    }

    struct Plan {
        enum Work {
            case scale(Scaler)
            /// Tagged input swscale must do: the scaled picture, still in stored orientation, is
            /// turned from the pool's picture into `target`.
            case scaleThenTurn(Scaler, StorageMap, VideoFramePool)
            /// Quarter-turned 4:2:0: scaled and turned in one pass.
            case turnScale(TurnScaler)
        }
        let work: Work
        /// In the stored picture.
        let source: PixelRect
        /// In the upright output.
        let target: PixelRect
    }

    let width: Int, height: Int
    let mode: Placement.Mode
    let quality: Scaler.Quality
    let layout: PixelLayout
    let background: [[UInt8]]
    let pool: VideoFramePool
    /// Media time in which every consumer replaces the picture unseen (NodeSetup.consumersHide).
    let hidden: [TimeSpan]

    /// Scaling state of one thread: a swscale context (and turn pool) per input geometry.
    final class Lane {
        var plans: [Geometry: Plan] = [:]
        /// Whether pictures are split across cores here (no lanes) or each stays on its lane's thread.
        let splitsPictures: Bool
        init(splitsPictures: Bool) { self.splitsPictures = splitsPictures }
    }
    let direct = Lane(splitsPictures: true)
    let lanes: FrameLanes<Lane>?

    init(_ setup: NodeSetup) throws {
        let f = setup.outputs[0]
        width = f.width
        height = f.height
        mode = setup[Self.mode]
        quality = setup[Self.quality]
        guard let l = PixelLayout(f.pixelFormat) else { throw MediaError("unknown pixel format '\(f.pixelFormat)'") }
        layout = l
        background = l.elements(for: setup[Self.background])
        pool = try VideoFramePool(width: width, height: height, pixelFormat: l.format)
        hidden = setup.consumersHide.first ?? []
        let count = setup.realtime ? 1 : FrameLanes<Lane>.offlineCount()
        lanes = count > 1 ? FrameLanes(count: count, label: "resize") { Lane(splitsPictures: false) } : nil
    }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        if let lanes {
            // Lane threads read only the node's `let`s (size, mode, pool: set in init, never changed).
            nonisolated(unsafe) let node = self
            try lanes.submit(frame, out) { frame, lane in try node.resize(frame, in: lane) }
        } else {
            out.emit(try resize(frame, in: direct))
        }
    }

    override func finish(_ out: Outlet) throws { try lanes?.drain(out) }

    override func abort() { lanes?.discard() }

    private func resize(_ frame: Frame, in lane: Lane) throws -> Frame {
        let resized = try pool.frame(timeBase: frame.timeBase)
        resized.copyProperties(from: frame)
        resized.av.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        resized.tagBT709Limited()
        // The consumers replace this picture unseen (a scheduled privacy card): only its size and
        // timing are used, so nothing is scaled or turned (nor read). It goes out in the
        // background color, never as a pooled picture's stale content.
        if hidden.covers(frame.seconds) {
            resized.fill(PixelRect(x: 0, y: 0, width: width, height: height), with: background, layout: layout)
            return resized
        }
        let plan = try self.plan(for: frame, in: lane)
        switch plan.work {
        case .scale(let scaler):
            try scaler.scale(frame, plan.source, into: resized, plan.target)
        case .scaleThenTurn(let scaler, let map, let pool):
            let scaled = try pool.frame(timeBase: frame.timeBase)
            try scaler.scale(frame, plan.source, into: scaled, PixelRect(x: 0, y: 0, width: scaled.width, height: scaled.height))
            PictureTurn.upright(scaled, into: resized.region(plan.target, layout: layout), map: map, layout: layout,
                                bands: lane.splitsPictures ? nil : 1)
        case .turnScale(let scaler):
            scaler.scale(frame, plan.source, into: resized, plan.target)
        }
        resized.fill(around: plan.target, with: background, layout: layout)
        return resized
    }

    /// One swscale context per input geometry: the input size may change mid-stream (a turned phone).
    private func plan(for frame: Frame, in lane: Lane) throws -> Plan {
        let color = Scaler.colorDetails(of: frame)
        let tag = frame.orientation
        let key = Geometry(width: frame.width, height: frame.height, format: frame.av.pointee.format, fullRange: color.fullRange,
                           matrix: color.matrix, orientation: tag, chromaLocation: frame.av.pointee.chroma_location.rawValue)
        if let p = lane.plans[key] { return p }
        guard let inLayout = PixelLayout(frame.pixelFormat) else { throw MediaError("cannot scale pixel format \(key.format)") }
        // Placement is decided on the upright picture; the scaler reads the matching stored region.
        let upright = tag.uprightSize(width: frame.width, height: frame.height)
        let (uprightSource, target) = Placement.place(inWidth: upright.width, inHeight: upright.height, inAlign: inLayout.alignment,
                                                      outWidth: width, outHeight: height, outAlign: layout.alignment, mode: mode)
        let map = tag.storage
        let source = tag == .up ? uprightSource : map.bufferRect(uprightSource, bufferWidth: frame.width, bufferHeight: frame.height)
        let parts = lane.splitsPictures ? nil : 1 as Int?
        let work: Plan.Work
        if let fused = TurnScaler(from: source.width, source.height, frame.pixelFormat, to: target.width, target.height, layout.format,
                                  map: map, quality: quality, sourceFullRange: color.fullRange, sourceMatrix: color.matrix,
                                  chromaLocation: frame.av.pointee.chroma_location, parts: parts) {
            work = .turnScale(fused)
        } else {
            let scaled = tag.swapsAxes ? (width: target.height, height: target.width) : (width: target.width, height: target.height)
            let scaler = try Scaler(from: source.width, source.height, frame.pixelFormat, to: scaled.width, scaled.height, layout.format,
                                    quality: quality, sourceFullRange: color.fullRange, sourceMatrix: color.matrix, threads: parts)
            work = tag == .up ? .scale(scaler)
                : .scaleThenTurn(scaler, map, try VideoFramePool(width: scaled.width, height: scaled.height, pixelFormat: layout.format))
        }
        if lane.plans.count >= 8 { lane.plans.removeAll() }
        let p = Plan(work: work, source: source, target: target)
        lane.plans[key] = p
        return p
    }
}
