import CFFmpeg

/// What passing a source's own packets on needs of FFmpeg: the configuration record a packet
/// or stream carries, a stream described by another record, and a packet sent on restamped.
extension Packet {
    /// A copy of `packet` (its data shared, not copied) described by `stream`.
    public convenience init(referencing packet: UnsafePointer<AVPacket>, stream: EncodedStream) {
        self.init(owning: av_packet_clone(packet), stream: stream)
    }

    /// The configuration record that replaces the decoder's from this packet on, if it carries one.
    public var newExtradata: [UInt8]? {
        var size = 0
        guard let data = av_packet_get_side_data(av, AV_PKT_DATA_NEW_EXTRADATA, &size), size > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    /// The packet's bytes.
    public var bytes: ArraySlice<UInt8> {
        guard let data = av.pointee.data, av.pointee.size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(av.pointee.size)))[...]
    }

    /// The packet's first `count` bytes (fewer if it is shorter): a look at its framing without
    /// copying the whole picture or audio frame.
    public func leadingBytes(_ count: Int) -> [UInt8] {
        guard let data = av.pointee.data, av.pointee.size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: min(count, Int(av.pointee.size))))
    }

    /// This packet (timing, flags) with other bytes: the same picture in another framing.
    public func replacingData(_ bytes: [UInt8]) throws -> Packet {
        let copy = av_packet_alloc()!
        let packet = Packet(owning: copy, stream: stream)
        try BuiltPacket.fill(copy, bytes: bytes[...], stream: 0, pts: av.pointee.pts, dts: av.pointee.dts,
                             key: (av.pointee.flags & avg_pkt_flag_key()) != 0)
        copy.pointee.duration = av.pointee.duration
        return packet
    }

    /// The same compressed picture for another stream: data shared, timestamps `pts` (decode
    /// time the same: no reordering), one tick long, no side data (the new stream describes it).
    public func restamped(pts: Int64, stream: EncodedStream) -> Packet {
        let copy = av_packet_alloc()!
        av_packet_ref(copy, av)
        av_packet_free_side_data(copy)
        copy.pointee.pts = pts
        copy.pointee.dts = pts
        copy.pointee.duration = 1
        copy.pointee.pos = -1
        return Packet(owning: copy, stream: stream)
    }
}

extension EncodedStream {
    /// The stream's configuration record (extradata).
    public var extradata: [UInt8] {
        guard let data = parameters.pointee.extradata, parameters.pointee.extradata_size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(parameters.pointee.extradata_size)))
    }

    /// This stream described by another configuration record (parameter sets of two encoders in one).
    public func replacingExtradata(_ bytes: [UInt8]) throws -> EncodedStream {
        let copy = EncodedStream(copying: parameters, timeBase: timeBase, kind: kind, uplink: uplink, orientation: orientation, keyframes: keyframes)
        av_free(copy.parameters.pointee.extradata)
        copy.parameters.pointee.extradata = nil
        copy.parameters.pointee.extradata_size = 0
        guard let buffer = av_mallocz(bytes.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) else { throw MediaError("out of memory (extradata)") }
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        copy.parameters.pointee.extradata = buffer.assumingMemoryBound(to: UInt8.self)
        copy.parameters.pointee.extradata_size = Int32(bytes.count)
        return copy
    }

    /// This stream with its pictures stored the way `orientation` says.
    public func replacingOrientation(_ orientation: Orientation) -> EncodedStream {
        EncodedStream(copying: parameters, timeBase: timeBase, kind: kind, uplink: uplink, orientation: orientation, keyframes: keyframes)
    }
}

extension EncodedStream {
    /// The codec's short name (`h264`, `hevc`).
    public var codecName: String { String(cString: avcodec_get_name(parameters.pointee.codec_id)) }
}
