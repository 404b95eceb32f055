import CFFmpeg

/// One reference to a raw video picture or audio block in an FFmpeg `AVFrame`.
/// Passing it on passes the reference; `ref()` makes a second header over the same buffers.
/// A frame handed downstream is never written again, which is what makes sharing it safe.
// @unchecked: an AVFrame pointer is not Sendable; a frame goes from thread to thread along the edges,
// and one handed downstream is never written again (see above).
public final class Frame: @unchecked Sendable {
    public let av: UnsafeMutablePointer<AVFrame>
    public var timeBase: Rational
    public var orientation: Orientation
    /// Pipeline clock (seconds) when a source emitted the media this frame was made from; set by
    /// the outlet, carried by derived frames, so an encoder can measure its end-to-end latency.
    public var emittedAt: Double?
    /// In-band privacy state from the producer (nil: it declared none).
    public var privacy: PrivacyMark?
    /// The network source's compressed packet these pixels are, while they are unchanged.
    public var source: SourcePicture?
    /// The network source's picture that this one stands in for (a privacy card over it): an
    /// encoder that splices learns the source's stream from it when a card is the first picture
    /// it meets, so a phone that starts behind its card still has its own pictures passed on.
    public var covers: SourcePicture?

    public init(owning av: UnsafeMutablePointer<AVFrame>, timeBase: Rational, orientation: Orientation = .up) {
        self.av = av
        self.timeBase = timeBase
        self.orientation = orientation
    }

    /// An empty frame header (no buffers yet).
    public convenience init(timeBase: Rational) {
        self.init(owning: av_frame_alloc(), timeBase: timeBase)
    }

    deinit {
        var p: UnsafeMutablePointer<AVFrame>? = av
        av_frame_free(&p)
    }

    /// A new header that shares this frame's buffers (no pixels or samples copied).
    public func ref() -> Frame {
        // av_frame_clone would give a header without buffers a picture of its own, copied from nowhere.
        let copy = Frame(owning: av.pointee.buf.0 == nil ? headerCopy() : av_frame_clone(av), timeBase: timeBase, orientation: orientation)
        copy.emittedAt = emittedAt
        copy.privacy = privacy
        copy.source = source
        copy.covers = covers
        return copy
    }

    /// A picture whose pixels are still in its source packet, not decoded (see `SourcePicture`):
    /// size, format and timing are there; a node that looks at the pixels calls `loadPixels()` first.
    public var awaitsPixels: Bool { av.pointee.buf.0 == nil && source?.decoding != nil }

    /// Decodes the pixels of a picture that awaits them (nothing for any other frame). Called by
    /// the node that asks, on its own thread; every frame of the same packet shares the result.
    public func loadPixels() throws {
        guard awaitsPixels, let source, let decoding = source.decoding else { return }
        try adoptPixels(of: source.decodedPicture ?? decoding.decode(source))
    }

    public var pts: Int64 {
        get { av.pointee.pts }
        set { av.pointee.pts = newValue }
    }

    /// Presentation time in microseconds.
    public var time: Int64 { Rational.rescale(pts, from: timeBase, to: Rational(1, 1_000_000)) }
    public var seconds: Double { Double(pts) * timeBase.double }

    public var width: Int { Int(av.pointee.width) }
    public var height: Int { Int(av.pointee.height) }
    public var sampleCount: Int { Int(av.pointee.nb_samples) }
    public var sampleRate: Int { Int(av.pointee.sample_rate) }
    public var channels: Int { Int(av.pointee.ch_layout.nb_channels) }

    /// Duration in microseconds: one sample block, or 0 for pictures (their duration is the rate's).
    public var duration: Int64 {
        if sampleCount > 0 && sampleRate > 0 { return Int64(sampleCount) * 1_000_000 / Int64(sampleRate) }
        return Rational.rescale(av.pointee.pkt_duration, from: timeBase, to: Rational(1, 1_000_000))
    }

    /// Bytes held by this frame's buffers, for the memory budget.
    public var byteCount: Int {
        var total = 0
        forEachBuffer { total += $1 }
        return total
    }

    /// Each buffer behind this frame, by identity (every reference shares it), and its bytes.
    func forEachBuffer(_ body: (OpaquePointer, Int) -> Void) {
        withUnsafePointer(to: av.pointee.buf) { tuple in
            tuple.withMemoryRebound(to: UnsafeMutablePointer<AVBufferRef>?.self, capacity: 8) { bufs in
                for i in 0..<8 { if let b = bufs[i], let buffer = b.pointee.buffer { body(buffer, Int(b.pointee.size)) } }
            }
        }
    }

    /// Plane pointers and line sizes, for nodes that hand them to FFmpeg.
    public func plane(_ i: Int) -> UnsafeMutablePointer<UInt8>? {
        withUnsafePointer(to: av.pointee.data) { tuple in
            tuple.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { $0[i] }
        }
    }

    public func lineSize(_ i: Int) -> Int {
        withUnsafePointer(to: av.pointee.linesize) { tuple in
            tuple.withMemoryRebound(to: Int32.self, capacity: 8) { Int($0[i]) }
        }
    }

    /// Makes the buffers writable, copying only when another reference shares them (FFmpeg's copy-on-write).
    public func makeWritable() throws {
        try AVFailure.check(av_frame_make_writable(av), "av_frame_make_writable")
    }
}
