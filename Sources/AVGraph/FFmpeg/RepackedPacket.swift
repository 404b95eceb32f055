import CFFmpeg

/// A demuxed packet reframed in place: other bytes for the same picture or audio frame, its
/// timing, flags and stream kept, as a source that turns one framing into another needs (an SRT
/// phone's Annex B H.264 into NAL lengths).
public enum RepackedPacket {
    /// The bytes `packet` holds (a copy).
    public static func bytes(_ packet: UnsafePointer<AVPacket>) -> [UInt8] {
        guard let data = packet.pointee.data, packet.pointee.size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(packet.pointee.size)))
    }

    /// `packet` holding `bytes` instead; `newExtradata`: the configuration record that describes
    /// the stream from this packet on (a decoder takes it in, as from libavformat's demuxers).
    public static func replace(_ packet: UnsafeMutablePointer<AVPacket>, with bytes: [UInt8], newExtradata: [UInt8]? = nil) throws {
        let kept = packet.pointee
        try BuiltPacket.fill(packet, bytes: bytes[...], stream: Int(kept.stream_index), pts: kept.pts, dts: kept.dts,
                             key: false, newExtradata: newExtradata)
        packet.pointee.flags = kept.flags
        packet.pointee.duration = kept.duration
        packet.pointee.pos = kept.pos
        packet.pointee.time_base = kept.time_base
    }
}
