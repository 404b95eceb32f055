import CFFmpeg

/// A libavcodec video encoder: configure the context, open it, then frames in, packets out.
public final class VideoEncoder {
    public let context: UnsafeMutablePointer<AVCodecContext>
    public let codec: UnsafePointer<AVCodec>
    private var drained = false

    public init(codecName: String) throws {
        guard let codec = avcodec_find_encoder_by_name(codecName) else {
            throw MediaError("this FFmpeg has no \(codecName) encoder")
        }
        guard let ctx = avcodec_alloc_context3(codec) else { throw MediaError("out of memory (avcodec_alloc_context3)") }
        self.codec = codec
        context = ctx
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
    }

    /// Opens the encoder with codec-private options (`preset`, `tune`, `profile`, ...).
    /// Options the encoder does not know are an error, not silently ignored.
    public func open(options: [String: String]) throws {
        try openEncoder(context, codec, options: options)
    }

    /// Feeds one frame, or nil to flush the frames the encoder still holds.
    public func send(_ frame: UnsafePointer<AVFrame>?) throws {
        if frame == nil {
            if drained { return }
            drained = true
        }
        try AVFailure.check(avcodec_send_frame(context, frame), "encoding")
    }

    /// The next packet (timestamps in the context's time base), or nil when the encoder needs more.
    public func receive() throws -> UnsafeMutablePointer<AVPacket>? {
        let packet = av_packet_alloc()!
        let r = avcodec_receive_packet(context, packet)
        if r >= 0 { return packet }
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
        if r == avg_error_eagain() || r == avg_error_eof() { return nil }
        throw AVFailure(r, "encoding")
    }
}
