import CFFmpeg

/// How an encoded stream is described to a muxer: FFmpeg's codec parameters plus the time
/// base of its packets. Shared by every packet of one encoder.
// @unchecked: an AVCodecParameters pointer is not Sendable; it is written once, in init, and only read after.
public final class EncodedStream: @unchecked Sendable {
    public let parameters: UnsafeMutablePointer<AVCodecParameters>
    public let timeBase: Rational
    public let kind: MediaKind
    /// Set by an encoder that adapts its bitrate: the live sinks its packets reach report their uplink here.
    public let uplink: UplinkFeedback?
    /// Set by an encoder that makes a keyframe when asked: sinks with viewers that join or lose a picture ask here.
    public let keyframes: KeyframeRequests?
    /// How the pictures are stored (a passthrough encoder's first picture's tag): a container
    /// that can writes it as the track's display matrix; the others leave it out.
    public let orientation: Orientation

    public init(copying context: UnsafePointer<AVCodecContext>, kind: MediaKind, uplink: UplinkFeedback? = nil, keyframes: KeyframeRequests? = nil) {
        parameters = avcodec_parameters_alloc()
        avcodec_parameters_from_context(parameters, context)
        timeBase = Rational(context.pointee.time_base)
        self.kind = kind
        self.uplink = uplink
        self.keyframes = keyframes
        orientation = .up
    }

    public init(copying parameters: UnsafePointer<AVCodecParameters>, timeBase: Rational, kind: MediaKind, uplink: UplinkFeedback? = nil,
                orientation: Orientation = .up, keyframes: KeyframeRequests? = nil) {
        self.parameters = avcodec_parameters_alloc()
        avcodec_parameters_copy(self.parameters, parameters)
        self.timeBase = timeBase
        self.kind = kind
        self.uplink = uplink
        self.orientation = orientation
        self.keyframes = keyframes
    }

    deinit {
        var p: UnsafeMutablePointer<AVCodecParameters>? = parameters
        avcodec_parameters_free(&p)
    }
}

/// One reference to an encoded packet in an FFmpeg `AVPacket`.
// @unchecked: an AVPacket pointer is not Sendable; a packet goes from thread to thread along the
// edges, one holder at a time writing it (a reference per consumer: `ref()`).
public final class Packet: @unchecked Sendable {
    public let av: UnsafeMutablePointer<AVPacket>
    public let stream: EncodedStream

    public init(owning av: UnsafeMutablePointer<AVPacket>, stream: EncodedStream) {
        self.av = av
        self.stream = stream
    }

    deinit {
        var p: UnsafeMutablePointer<AVPacket>? = av
        av_packet_free(&p)
    }

    /// A new packet sharing this one's data.
    public func ref() -> Packet { Packet(owning: av_packet_clone(av), stream: stream) }

    public var timeBase: Rational { stream.timeBase }
    public var pts: Int64 { av.pointee.pts }
    public var dts: Int64 { av.pointee.dts }
    public var isKeyframe: Bool { (av.pointee.flags & avg_pkt_flag_key()) != 0 }
    public var byteCount: Int { Int(av.pointee.size) }

    /// The buffer behind this packet, by identity (every reference shares it), and its bytes.
    func forEachBuffer(_ body: (OpaquePointer, Int) -> Void) {
        if let b = av.pointee.buf, let buffer = b.pointee.buffer { body(buffer, byteCount) } else { body(OpaquePointer(av), byteCount) }
    }
    /// Decode time in microseconds (what a muxer orders by).
    public var time: Int64 {
        let t = av.pointee.dts != avg_nopts() ? av.pointee.dts : av.pointee.pts
        return Rational.rescale(t, from: timeBase, to: Rational(1, 1_000_000))
    }
}

/// What travels on an edge.
public enum MediaBuffer: Sendable {
    case frame(Frame)
    case packet(Packet)

    public var time: Int64 {
        switch self {
        case .frame(let f): return f.time
        case .packet(let p): return p.time
        }
    }

    public var byteCount: Int {
        switch self {
        case .frame(let f): return f.byteCount
        case .packet(let p): return p.byteCount
        }
    }

    /// Each buffer behind this item, by identity (every reference shares it), and its bytes.
    func forEachBuffer(_ body: (OpaquePointer, Int) -> Void) {
        switch self {
        case .frame(let f): f.forEachBuffer(body)
        case .packet(let p): p.forEachBuffer(body)
        }
    }

    public var frame: Frame? { if case .frame(let f) = self { return f } else { return nil } }
    public var packet: Packet? { if case .packet(let p) = self { return p } else { return nil } }
}
