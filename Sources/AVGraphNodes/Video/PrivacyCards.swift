import AVGraph
import CFFmpeg

/// The privacy node's cards: each image decoded once and fitted once per picture geometry
/// (black bars, the stream's pixel format, BT.709 limited); a card is then shown by reference,
/// so no picture is converted or copied per frame.
struct PrivacyCards {
    /// A picture's stored size and pixel format, and the tag it is shown upright by: a card for a
    /// turned picture is drawn turned back, so it stands up where the picture would.
    struct Geometry: Hashable { var width: Int, height: Int, format: Int32, orientation = Orientation.up }

    /// Card name -> image path. The single `image:` card is named `image`.
    let paths: [String: String]
    /// Decoded images, kept only while pictures of a geometry not prepared for may arrive.
    private var images: [String: Frame] = [:]
    private var fitted: [String: [Geometry: Frame]] = [:]

    /// Decodes every card now and fits it to `geometry` (the negotiated picture), so switching
    /// privacy on costs nothing at that moment; a card that cannot be read refuses the run.
    init(paths: [String: String], geometry: Geometry?, sizeVaries: Bool) throws {
        self.paths = paths
        for (name, path) in paths {
            let image: Frame
            do { image = try ImageLoader.load(path) } catch { throw MediaError("cannot read privacy card '\(name)' (\(path)): \(error)") }
            if let geometry { fitted[name] = [geometry: try Self.fit(image, to: geometry)] }
            if geometry == nil || sizeVaries { images[name] = image }
        }
    }

    /// `name`'s card for `frame`'s geometry (fitted now if that geometry is new).
    mutating func card(_ name: String, for frame: Frame) throws -> Frame {
        let key = Geometry(width: frame.width, height: frame.height, format: frame.av.pointee.format, orientation: frame.orientation)
        if let c = fitted[name]?[key] { return c }
        let image: Frame
        if let i = images[name] { image = i } else {
            guard let path = paths[name] else { throw MediaError("no privacy card named '\(name)'") }
            image = try ImageLoader.load(path)
            images[name] = image
        }
        let card = try Self.fit(image, to: key)
        // A stream that keeps turning would otherwise collect cards; keep the few recent geometries.
        if (fitted[name]?.count ?? 0) >= 4 { fitted[name] = [:] }
        fitted[name, default: [:]][key] = card
        return card
    }

    /// The image fitted into a picture of `key`'s geometry, black bars around it (timestamps are set per use).
    static func fit(_ image: Frame, to key: Geometry) throws -> Frame {
        guard key.orientation != .up else { return try fitUpright(image, to: key) }
        let size = key.orientation.uprightSize(width: key.width, height: key.height)
        let upright = try fitUpright(image, to: Geometry(width: size.width, height: size.height, format: key.format))
        guard let layout = PixelLayout(AVPixelFormat(rawValue: key.format)), layout.canTurn else {
            throw MediaError("cannot turn the card in pixel format \(key.format)")
        }
        let stored = try picture(width: key.width, height: key.height, format: key.format)
        PictureTurn.upright(upright, into: stored, map: key.orientation.inverse.storage, layout: layout)
        return stored
    }

    /// An empty picture of this size and format, tagged BT.709 limited range like every card.
    static func picture(width: Int, height: Int, format: Int32) throws -> Frame {
        let card = Frame(timeBase: Rational(1, 1))
        card.av.pointee.width = Int32(width)
        card.av.pointee.height = Int32(height)
        card.av.pointee.format = format
        try AVFailure.check(av_frame_get_buffer(card.av, 32), "av_frame_get_buffer")
        card.tagBT709Limited()
        return card
    }

    private static func fitUpright(_ image: Frame, to key: Geometry) throws -> Frame {
        let pixelFormat = AVPixelFormat(rawValue: key.format)
        guard let layout = PixelLayout(pixelFormat) else { throw MediaError("cannot draw the card in pixel format \(key.format)") }
        let card = try picture(width: key.width, height: key.height, format: key.format)
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
