import CFFmpeg

/// Codec parameters of a stream avgraph reads itself (its own FLV tag reader) rather than
/// through a libavformat demuxer: what a decoder is opened with.
public final class CodecParameters {
    public let pointer: UnsafeMutablePointer<AVCodecParameters>

    /// A video stream: `extradata` is the codec's configuration record (avcC, hvcC, av1C, vpcC),
    /// sizes 0 when the headers did not tell (the decoder finds out).
    public init(video codec: AVCodecID, width: Int, height: Int, extradata: [UInt8]) throws {
        pointer = try Self.allocate()
        pointer.pointee.codec_type = AVMEDIA_TYPE_VIDEO
        pointer.pointee.codec_id = codec
        // What a hostile header declares may not fit FFmpeg's ints: not told, then (the decoder
        // finds out, and its max_pixels refuses what is too large).
        pointer.pointee.width = Self.told(width)
        pointer.pointee.height = Self.told(height)
        try setExtradata(extradata)
    }

    /// An audio stream: `extradata` is e.g. AAC's AudioSpecificConfig or an OpusHead.
    public init(audio codec: AVCodecID, sampleRate: Int, channels: Int, extradata: [UInt8]) throws {
        pointer = try Self.allocate()
        pointer.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        pointer.pointee.codec_id = codec
        pointer.pointee.sample_rate = Self.told(sampleRate)
        if (1...64).contains(channels) { av_channel_layout_default(&pointer.pointee.ch_layout, Int32(channels)) }
        try setExtradata(extradata)
    }

    /// A count a header declared, as FFmpeg holds it; 0 (not told) when it is negative or does not fit.
    static func told(_ value: Int) -> Int32 { Int32(exactly: value).map { max(0, $0) } ?? 0 }

    deinit {
        var p: UnsafeMutablePointer<AVCodecParameters>? = pointer
        avcodec_parameters_free(&p)
    }

    private static func allocate() throws -> UnsafeMutablePointer<AVCodecParameters> {
        guard let p = avcodec_parameters_alloc() else { throw MediaError("out of memory (avcodec_parameters_alloc)") }
        return p
    }

    private func setExtradata(_ bytes: [UInt8]) throws {
        guard !bytes.isEmpty else { return }
        // libavcodec reads past the end in word steps: the padding is zeroed.
        guard let buffer = av_mallocz(bytes.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else { throw MediaError("out of memory (extradata)") }
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        pointer.pointee.extradata = buffer.assumingMemoryBound(to: UInt8.self)
        pointer.pointee.extradata_size = Int32(bytes.count)
    }

    public var codecName: String { String(cString: avcodec_get_name(pointer.pointee.codec_id)) }
}

/// Packets built from bytes avgraph parsed itself.
public enum BuiltPacket {
    /// Fills `packet` (unreffed first) with a copy of `bytes` for stream `stream`, times in the
    /// stream's time base. `newExtradata`: a configuration record that replaces the decoder's
    /// from this packet on (a phone turned: a new size), as libavformat's demuxers hand it on.
    public static func fill(_ packet: UnsafeMutablePointer<AVPacket>, bytes: ArraySlice<UInt8>, stream: Int,
                            pts: Int64, dts: Int64, key: Bool, newExtradata: [UInt8]? = nil) throws {
        av_packet_unref(packet)
        try AVFailure.check(av_new_packet(packet, Int32(bytes.count)), "av_new_packet")
        if !bytes.isEmpty {
            bytes.withUnsafeBytes { packet.pointee.data.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: bytes.count) }
        }
        packet.pointee.stream_index = Int32(stream)
        packet.pointee.pts = pts
        packet.pointee.dts = dts
        if key { packet.pointee.flags |= avg_pkt_flag_key() }
        if let extradata = newExtradata, !extradata.isEmpty {
            guard let side = av_packet_new_side_data(packet, AV_PKT_DATA_NEW_EXTRADATA, extradata.count) else {
                throw MediaError("out of memory (new extradata)")
            }
            extradata.withUnsafeBytes { side.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: extradata.count) }
        }
    }
}
