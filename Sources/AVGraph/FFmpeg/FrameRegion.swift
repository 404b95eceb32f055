import CFFmpeg

extension Frame {
    /// A header over `rect` of this picture's planes (no buffer of its own, nothing copied), for
    /// code that writes a whole picture into part of another: `PictureTurn` into the middle of a
    /// padded canvas. It must not outlive this frame; it is never emitted.
    public func region(_ rect: PixelRect, layout: PixelLayout) -> Frame {
        let view = Frame(timeBase: timeBase)
        view.av.pointee.width = Int32(rect.width)
        view.av.pointee.height = Int32(rect.height)
        view.av.pointee.format = av.pointee.format
        let data = view.dataPointers, lines = view.lineSizes
        for p in layout.planes.indices {
            data[p] = plane(p).map { $0 + layout.offset(plane: p, x: rect.x, y: rect.y, lineSize: lineSize(p)) }
            lines[p] = Int32(lineSize(p))
        }
        return view
    }
}
