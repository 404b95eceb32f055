import CFFmpeg

/// A libavcodec decoder for one stream: packets in, frames out (send/receive).
public final class Decoder {
    public let context: UnsafeMutablePointer<AVCodecContext>
    private var ended = false
    /// Packets the decoder refused as damaged (and skipped).
    public private(set) var damagedPackets = 0

    /// `threads` 0 lets libavcodec pick from the core count. `maxPixels` (0: no bound) makes
    /// the decoder refuse a picture larger than that before allocating it. `lowDelay`: each
    /// picture out as soon as its packet is in (a stream without reordering; with one thread).
    public init(parameters: UnsafePointer<AVCodecParameters>, timeBase: Rational, threads: Int = 0, maxPixels: Int = 0,
                lowDelay: Bool = false) throws {
        guard let codec = avcodec_find_decoder(parameters.pointee.codec_id) else {
            let name = String(cString: avcodec_get_name(parameters.pointee.codec_id))
            throw MediaError("no decoder for \(name) in this FFmpeg")
        }
        guard let ctx = avcodec_alloc_context3(codec) else { throw MediaError("out of memory (avcodec_alloc_context3)") }
        context = ctx
        do {
            try AVFailure.check(avcodec_parameters_to_context(ctx, parameters), "avcodec_parameters_to_context")
            ctx.pointee.pkt_timebase = timeBase.av
            ctx.pointee.thread_count = Int32(threads)
            if maxPixels > 0 { ctx.pointee.max_pixels = Int64(maxPixels) }
            if lowDelay { ctx.pointee.flags |= avg_codec_flag_low_delay() }
            try AVFailure.check(avcodec_open2(ctx, codec, nil), "opening the \(String(cString: codec.pointee.name)) decoder")
        } catch {
            var c: UnsafeMutablePointer<AVCodecContext>? = ctx
            avcodec_free_context(&c)
            throw error
        }
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
    }

    /// Feeds one packet, or nil to drain what the decoder still holds.
    public func send(_ packet: UnsafePointer<AVPacket>?) throws {
        if packet == nil {
            if ended { return }
            ended = true
        }
        let r = avcodec_send_packet(context, packet)
        if r >= 0 || r == avg_error_eof() { return }
        // A damaged packet is skipped, as players do; the next keyframe recovers.
        if packet != nil { damagedPackets += 1; return }
        try AVFailure.check(r, "avcodec_send_packet")
    }

    /// The next decoded frame, or nil when the decoder needs more input (or is drained).
    public func receive() throws -> UnsafeMutablePointer<AVFrame>? {
        let frame = av_frame_alloc()!
        let r = avcodec_receive_frame(context, frame)
        if r >= 0 { return frame }
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
        if r == avg_error_eagain() || r == avg_error_eof() { return nil }
        // A frame the decoder gave up on (damaged data, seen late with frame threads) is skipped too.
        if r != avg_averror(ENOMEM) { damagedPackets += 1; return nil }
        throw AVFailure(r, "decoding")
    }

    /// Ready for a new stream of packets after a drain (the next loop of a file).
    public func reset() {
        avcodec_flush_buffers(context)
        ended = false
    }
}
