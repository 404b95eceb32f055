import AVGraph
import CFFmpeg

/// `orient` when its pictures' tag reaches every viewer as a display matrix
/// (`NodeSetup.orientationCarried`): pictures go on as sent, tag kept, so a passthrough encoder
/// can send the source's own packets. A track has one display matrix for the whole run: the
/// first picture's tag is kept; a picture with another one (the phone turned mid-stream) is
/// stood upright, fitted into the first orientation's upright size with bars, and turned back
/// to be stored like the first picture: new pixels, so encoded, with a warning at the change.
struct KeptOrientation {
    /// The first picture's tag and stored size: what the stream declares.
    private(set) var kept: (tag: Orientation, width: Int, height: Int)?
    private var changed = false

    mutating func picture(_ frame: Frame, tag: Orientation, _ out: Outlet) throws -> Frame {
        guard let kept else {
            kept = (tag, frame.width, frame.height)
            frame.orientation = tag
            return frame
        }
        if tag == kept.tag && frame.width == kept.width && frame.height == kept.height {
            if changed {
                changed = false
                out.warning("orient: the pictures are stored as at the start again (\(tag.rawValue)): sent on as they came")
            }
            frame.orientation = tag
            return frame
        }
        if !changed {
            changed = true
            out.warning("orient: the orientation changed at \(frame.seconds) s (\(kept.tag.rawValue) \(kept.width)x\(kept.height) -> \(tag.rawValue) "
                        + "\(frame.width)x\(frame.height)); the track's display matrix holds the first one, so these pictures are turned and fitted to it (encoded)")
        }
        try frame.loadPixels()
        let format = frame.pixelFormat
        var upright = frame
        if tag != .up {
            guard let layout = PixelLayout(format), layout.canTurn else { throw MediaError("cannot turn pictures of pixel format \(format.rawValue)") }
            let size = tag.uprightSize(width: frame.width, height: frame.height)
            upright = try PrivacyCards.picture(width: size.width, height: size.height, format: format.rawValue)
            PictureTurn.upright(frame, into: upright, map: tag.storage, layout: layout)
        }
        let stored = try PrivacyCards.fit(upright, to: PrivacyCards.Geometry(width: kept.width, height: kept.height, format: format.rawValue, orientation: kept.tag))
        stored.copyProperties(from: frame)
        stored.orientation = kept.tag
        return stored
    }
}
