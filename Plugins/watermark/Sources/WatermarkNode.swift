import AVGraph
import CFFmpeg

/// Draws a PNG (or a line of text) at a corner of every picture.
///
/// The mark is prepared once per picture width (scaled, turned into BT.709 limited Y/Cb/Cr plus
/// alpha); each frame then gets one alpha blend over the mark's rectangle, in place (FFmpeg's
/// copy-on-write copies first only if another node still holds the same buffer).
public final class WatermarkNode: Filter, Node, @unchecked Sendable {
    public static let typeName = "watermark"
    public static let summary = "draws a PNG or a line of text at a corner of the picture"
    public static let inputs = [PadSpec("video", [.rawVideo], doc: "yuv420p or nv12 pictures")]
    public static let outputs = [PadSpec("video", [.rawVideo], doc: "the same pictures with the mark drawn in")]
    public static let corners = ["top-left", "top-right", "bottom-left", "bottom-right"]
    static let image = Setting.path("image", mustExist: true, doc: "a PNG (with alpha) or any picture FFmpeg decodes; or give 'text'")
    static let text = Setting<String?>.string("text", doc: "a line of text (A-Z, 0-9 and common signs; lower case is drawn as upper case)")
    static let corner = Setting.choice("corner", corners, default: "bottom-right", live: true, doc: "where the mark sits")
    static let opacity = Setting.number("opacity", 0...1, default: 0.8, live: true, doc: "0 hides the mark, 1 draws it fully opaque")
    static let margin = Setting.int("margin", 0...1000, default: 16, doc: "distance from the picture's edges, in pixels")
    static let scale = Setting.number("scale", 0.01...1, default: 0.2,
        doc: "the mark's width as a share of the picture's width (image); for text, glyph height as a share of the picture's height / 2")
    public static let options = [image.spec, text.spec, corner.spec, opacity.spec, margin.spec, scale.spec]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let input = n.format(on: "video") else { throw NegotiationError("input 'video' is not connected") }
        guard ["yuv420p", "nv12"].contains(input.pixelFormat) else {
            throw NegotiationError("watermark draws into yuv420p or nv12 pictures, got \(input.pixelFormat)",
                                   hint: "put a resize (format: yuv420p) before it")
        }
        let image = n.path(Self.image), text = n[Self.text]
        switch (image, text) {
        case (nil, nil): throw NegotiationError("give 'image' or 'text'", hint: "image: logo.png, or text: LIVE")
        case (.some, .some): throw NegotiationError("give 'image' or 'text', not both", option: "text")
        case (let path?, nil):
            do { _ = try ImageLoader.load(path) } catch {
                throw NegotiationError("cannot read image '\(n[Self.image] ?? path)': \(error)", option: "image")
            }
        case (nil, let t?):
            if t.isEmpty { throw NegotiationError("'text' is empty", option: "text") }
        }
        return [input]
    }

    let source: WatermarkMark.Source
    let margin: Int
    let scale: Double
    var corner: String
    var opacity: Double
    var mark: WatermarkMark?

    public init(_ setup: NodeSetup) throws {
        if let path = setup.path(Self.image) {
            source = .image(try ImageLoader.load(path))
        } else {
            source = .text(setup[Self.text] ?? "")
        }
        margin = setup[Self.margin]
        scale = setup[Self.scale]
        corner = setup[Self.corner]
        opacity = setup[Self.opacity]
    }

    override public func set(option: String, to value: OptionValue) throws {
        if let c = try Self.corner.value(in: option, value) { corner = c }
        else if let o = try Self.opacity.value(in: option, value) { opacity = o }
        else { throw MediaError("option '\(option)' cannot be changed while running") }
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        if opacity > 0 {
            if mark == nil || mark!.forWidth != frame.width || mark!.forHeight != frame.height {
                mark = try WatermarkMark(source, pictureWidth: frame.width, pictureHeight: frame.height, scale: scale)
            }
            try frame.makeWritable()
            mark!.draw(into: frame, corner: corner, margin: margin, opacity: opacity)
        }
        out.emit(frame)
    }
}
