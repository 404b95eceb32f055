import AVGraph
import CFFmpeg

/// Hides the picture behind an image while on (the `enabled` switch, live, or a `schedule`).
/// The image is decoded once and converted once per picture geometry (fitted, black bars, the
/// stream's pixel format, BT.709 limited); while on, each frame is swapped for a reference to
/// that card carrying the frame's timestamp, so no picture is converted or copied per frame.
final class PrivacyNode: Node, @unchecked Sendable {
    static let typeName = "privacy"
    static let summary = "replace the picture by an image while on (live switch or schedule)"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo], doc: "the input, or the image while on; timing kept")]
    static let image = Setting.path("image", mustExist: true, required: true, doc: "the privacy card (PNG, JPEG...), fitted to the picture size")
    static let enabled = Setting.bool("enabled", default: false, live: true, doc: "show the card now (avgraph ctl PIPELINE set NODE.enabled true)")
    static let schedule = Setting.spans("schedule", doc: "spans of media time [{at: 20s, for: 10s}] when the card shows by itself")
    static let options = [image.spec, enabled.spec, schedule.spec]

    /// The schedule is fixed for the run, so producers may skip drawing what it covers; the live
    /// `enabled` switch is not: a picture skipped for it could arrive after the switch went off.
    static func hiddenSpans(input: Int, options: OptionValues) -> [TimeSpan] { options[Self.schedule] }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let input = n.format(on: "video") else { throw NegotiationError("input 'video' is not connected") }
        guard let layout = PixelLayout(input.pixelFormat), sws_isSupportedOutput(layout.format) > 0 else {
            throw NegotiationError("cannot draw the card in \(input.pixelFormat) pictures")
        }
        if let path = n.path(Self.image) {
            do { _ = try ImageLoader.load(path) } catch {
                throw NegotiationError("cannot read image '\(n[Self.image] ?? path)': \(error)", option: "image")
            }
        }
        return [input]
    }

    struct Geometry: Hashable { var width: Int, height: Int, format: Int32 }

    let imagePath: String
    /// The decoded image, kept only while a picture of a geometry not prepared for may arrive.
    var image: Frame?
    let schedule: [TimeSpan]
    var enabled: Bool
    var cards: [Geometry: Frame] = [:]

    init(_ setup: NodeSetup) throws {
        guard let path = setup.path(Self.image) else { throw MediaError("missing image") }
        imagePath = path
        let loaded = try ImageLoader.load(path)
        schedule = setup[Self.schedule]
        enabled = setup[Self.enabled]
        // The card for the negotiated picture is made now, so switching privacy on costs nothing
        // at that moment; with a fixed size no other card is needed and the decoded image goes.
        if let f = setup.inputs.first?.format, f.width > 0, f.height > 0, let format = PixelLayout.format(named: f.pixelFormat) {
            let key = Geometry(width: f.width, height: f.height, format: format.rawValue)
            cards[key] = try Self.makeCard(from: loaded, for: key)
            if !f.sizeVaries { return }
        }
        image = loaded
    }

    func set(option: String, to value: OptionValue) throws {
        guard let on = try Self.enabled.value(in: option, value) else {
            throw MediaError("option '\(option)' cannot be changed while running")
        }
        enabled = on
    }

    func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        let t = frame.seconds
        guard enabled || schedule.contains(where: { $0.contains(t) }) else {
            out.emit(frame)
            return
        }
        let shown = try card(for: frame).ref()
        shown.pts = frame.pts
        shown.timeBase = frame.timeBase
        shown.av.pointee.pkt_duration = frame.av.pointee.pkt_duration
        shown.orientation = .up
        shown.emittedAt = frame.emittedAt
        out.emit(shown)
    }

    private func card(for frame: Frame) throws -> Frame {
        let key = Geometry(width: frame.width, height: frame.height, format: frame.av.pointee.format)
        if let c = cards[key] { return c }
        let source: Frame
        if let image { source = image } else {
            source = try ImageLoader.load(imagePath)
            image = source
        }
        let card = try Self.makeCard(from: source, for: key)
        // A stream that keeps turning would otherwise collect cards; keep the few recent geometries.
        if cards.count >= 4 { cards.removeAll() }
        cards[key] = card
        return card
    }

    /// The image fitted into a picture of `key`'s geometry, black bars around it (timestamps are set per use).
    private static func makeCard(from image: Frame, for key: Geometry) throws -> Frame {
        let pixelFormat = AVPixelFormat(rawValue: key.format)
        guard let layout = PixelLayout(pixelFormat) else { throw MediaError("cannot draw the card in pixel format \(key.format)") }
        let card = Frame(timeBase: Rational(1, 1))
        card.av.pointee.width = Int32(key.width)
        card.av.pointee.height = Int32(key.height)
        card.av.pointee.format = key.format
        try AVFailure.check(av_frame_get_buffer(card.av, 32), "av_frame_get_buffer")
        card.tagBT709Limited()
        let imageAlign = PixelLayout(image.pixelFormat)?.alignment ?? 1
        let place = Placement.place(inWidth: image.width, inHeight: image.height, inAlign: imageAlign,
                                    outWidth: key.width, outHeight: key.height, outAlign: layout.alignment, mode: .fit)
        let color = Scaler.colorDetails(of: image)
        let scaler = try Scaler(from: image.width, image.height, image.pixelFormat, to: place.target.width, place.target.height, layout.format,
                                quality: .bicubic, sourceFullRange: color.fullRange, sourceMatrix: color.matrix)
        try scaler.scale(image, place.source, into: card, place.target)
        card.fill(around: place.target, with: layout.elements(for: RGB(r: 0, g: 0, b: 0)), layout: layout)
        return card
    }
}
