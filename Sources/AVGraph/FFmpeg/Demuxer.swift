import CFFmpeg

/// An open media file, read packet by packet (libavformat's demuxer).
public final class Demuxer {
    public let context: UnsafeMutablePointer<AVFormatContext>
    public let path: String

    /// `probe: false` skips decoding the first packets to learn the streams: for files whose
    /// header says it all (an MP4's moov), when only packets are copied.
    public init(path: String, probe: Bool = true) throws {
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        let opened = avformat_open_input(&ctx, path, nil, nil)
        guard opened >= 0, let ctx else {
            throw MediaError("cannot open '\(path)': \(AVFailure.message(opened))")
        }
        context = ctx
        self.path = path
        // Containers without a global header (ts, flv) only know sizes and rates after a few packets.
        let probed = probe ? avformat_find_stream_info(ctx, nil) : 0
        if probed < 0 {
            var c: UnsafeMutablePointer<AVFormatContext>? = ctx
            avformat_close_input(&c)
            throw MediaError("cannot read the streams of '\(path)': \(AVFailure.message(probed))")
        }
    }

    deinit {
        var c: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&c)
    }

    /// The stream a player would pick for `type`, or nil when the file has none.
    public func bestStream(_ type: AVMediaType) -> Int? {
        let i = av_find_best_stream(context, type, -1, -1, nil, 0)
        return i >= 0 ? Int(i) : nil
    }

    public func stream(_ index: Int) -> UnsafeMutablePointer<AVStream> {
        context.pointee.streams[index]!
    }

    /// The time of the file's first media, in microseconds (0 when unknown); a `.ts` often starts at 1.4 s.
    public var startTime: Int64 {
        let t = context.pointee.start_time
        return t == avg_nopts() ? 0 : t
    }

    /// Stretches of the file the demuxer could not make a packet of (and skipped).
    public private(set) var damagedPackets = 0

    /// Reads the next packet into `packet` (which it unrefs first); false at the end of the file.
    /// Damaged data is skipped and counted, as players do; a file that is nothing but damage
    /// (a thousand failures in a row) is an error.
    public func read(into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        var failures = 0
        while true {
            av_packet_unref(packet)
            let r = av_read_frame(context, packet)
            if r == avg_error_eof() { return false }
            if r == avg_averror_invaliddata() && failures < 1000 {
                failures += 1
                damagedPackets += 1
                continue
            }
            try AVFailure.check(r, "reading '\(path)'")
            if packet.pointee.flags & avg_pkt_flag_corrupt() != 0 { damagedPackets += 1 }
            return true
        }
    }
}
