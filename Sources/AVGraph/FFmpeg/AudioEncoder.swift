import CFFmpeg

/// One libavcodec audio encoder (the native `aac`, `libopus`), opened for one stream shape. Packets
/// share one `EncodedStream` made after `avcodec_open2`, so the muxer sees the codec's extradata.
public final class AudioEncoder {
    private var ctx: UnsafeMutablePointer<AVCodecContext>?
    public private(set) var stream: EncodedStream!
    public let shape: AudioShape

    /// `format`: the sample layout the codec takes (libopus: s16 or flt, not planar). `options`: the
    /// codec's private options by their FFmpeg names (libopus: `frame_duration`, `application`).
    public init(codec name: String, rate: Int, channels: Int, bitrate: Int, format: AVSampleFormat = AV_SAMPLE_FMT_FLTP,
                options: [String: String] = [:], globalHeader: Bool = true) throws {
        guard let codec = avcodec_find_encoder_by_name(name) else { throw MediaError("encoder '\(name)' is not available in this FFmpeg") }
        guard let c = avcodec_alloc_context3(codec) else { throw MediaError("cannot allocate a '\(name)' encoder") }
        ctx = c
        c.pointee.sample_rate = Int32(rate)
        c.pointee.sample_fmt = format
        av_channel_layout_default(&c.pointee.ch_layout, Int32(channels))
        c.pointee.bit_rate = Int64(bitrate)
        c.pointee.time_base = AVRational(num: 1, den: Int32(rate))
        // MP4/MOV/FLV carry the AudioSpecificConfig out of band: make the encoder export it.
        if globalHeader { c.pointee.flags |= avg_codec_flag_global_header() }
        try openEncoder(c, codec, options: options)
        shape = AudioShape(rate: rate, channels: channels, format: format)
        stream = EncodedStream(copying: c, kind: .encodedAudio)
    }

    deinit { avcodec_free_context(&ctx) }

    /// Samples per frame the codec wants (1024 for AAC; libopus: its frame duration's).
    public var frameSize: Int { Int(ctx!.pointee.frame_size) }

    /// Sends one frame (nil: end of stream) and returns every packet that became ready.
    public func encode(_ frame: Frame?) throws -> [Packet] {
        let sent = avcodec_send_frame(ctx, frame?.av)
        if sent != avg_error_eof() { try AVFailure.check(sent, "avcodec_send_frame") }
        var packets: [Packet] = []
        while true {
            let pkt = av_packet_alloc()!
            let r = avcodec_receive_packet(ctx, pkt)
            if r == avg_error_eagain() || r == avg_error_eof() {
                var p: UnsafeMutablePointer<AVPacket>? = pkt
                av_packet_free(&p)
                break
            }
            if r < 0 {
                var p: UnsafeMutablePointer<AVPacket>? = pkt
                av_packet_free(&p)
                throw AVFailure(r, "avcodec_receive_packet")
            }
            packets.append(Packet(owning: pkt, stream: stream))
        }
        return packets
    }
}
