import CFFmpeg

/// An open media file, read packet by packet (libavformat's demuxer).
public final class Demuxer {
    public let context: UnsafeMutablePointer<AVFormatContext>
    public let path: String
    /// Retained here: libavformat only holds a raw pointer to it (network inputs).
    private let cancel: CancelFlag?
    /// Where a stream read through a callback comes from; closed after the input.
    private let io: ReadCallbackIO?

    /// `probe: false` skips decoding the first packets to learn the streams: for files whose
    /// header says it all (an MP4's moov), when only packets are copied.
    public init(path: String, probe: Bool = true) throws {
        cancel = nil
        io = nil
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        let opened = avformat_open_input(&ctx, path, nil, nil)
        guard opened >= 0, let ctx else {
            throw MediaError("cannot open '\(path)': \(AVFailure.message(opened))")
        }
        context = ctx
        self.path = path
        // Containers without a global header (ts, flv) only know sizes and rates after a few packets.
        // Fully initialised: on a throw from here deinit closes the input (closing it here too was a double free).
        let probed = probe ? avformat_find_stream_info(ctx, nil) : 0
        if probed < 0 { throw MediaError("cannot read the streams of '\(path)': \(AVFailure.message(probed))") }
    }

    /// A network input (`rtmp://`, `srt://`, or any URL libavformat reads): `options` go to the
    /// protocol and demuxer (e.g. `listen`, `rw_timeout`); every blocking call (waiting for a
    /// publisher, a stalled read) returns once `cancel` is set. `redacted` names it in errors.
    public init(url: String, format: String? = nil, options: [String: String], cancel: CancelFlag, redacted: String,
                analyzeSeconds: Double = 1) throws {
        self.cancel = cancel
        io = nil
        let ctx = try Self.liveContext(cancel: cancel, analyzeSeconds: analyzeSeconds)
        var dict: OpaquePointer?
        for (k, v) in options { av_dict_set(&dict, k, v, 0) }
        defer { av_dict_free(&dict) }
        var opened: UnsafeMutablePointer<AVFormatContext>? = ctx
        let r = avformat_open_input(&opened, url, format.flatMap { av_find_input_format($0) }, &dict)
        // On failure libavformat has freed the context.
        guard r >= 0, let opened else { throw MediaError("cannot open \(redacted): \(AVFailure.message(r))") }
        context = opened
        path = redacted
        // Fully initialised: on a throw from here deinit closes the input.
        let probed = avformat_find_stream_info(opened, nil)
        if probed < 0 { throw MediaError("cannot read the streams of \(redacted): \(AVFailure.message(probed))") }
    }

    /// A live stream whose bytes `read` delivers (see `ReadCallbackIO`: it may block, returns 0
    /// at the end), demuxed as `format` (`flv`, `mpegts`). `name` names it in errors.
    public init(format: String, name: String, cancel: CancelFlag, analyzeSeconds: Double = 1,
                read: @escaping (UnsafeMutableRawBufferPointer) -> Int) throws {
        self.cancel = cancel
        let io = try ReadCallbackIO(read: read)
        self.io = io
        let ctx = try Self.liveContext(cancel: cancel, analyzeSeconds: analyzeSeconds)
        ctx.pointee.pb = io.context
        var opened: UnsafeMutablePointer<AVFormatContext>? = ctx
        let r = avformat_open_input(&opened, nil, av_find_input_format(format), nil)
        guard r >= 0, let opened else { throw MediaError("cannot read the stream from \(name): \(AVFailure.message(r))") }
        context = opened
        path = name
        let probed = avformat_find_stream_info(opened, nil)
        if probed < 0 { throw MediaError("cannot read the streams from \(name): \(AVFailure.message(probed))") }
    }

    /// A format context for a live input: cancellable, quick to probe.
    private static func liveContext(cancel: CancelFlag, analyzeSeconds: Double) throws -> UnsafeMutablePointer<AVFormatContext> {
        guard let ctx = avformat_alloc_context() else { throw MediaError("out of memory (avformat_alloc_context)") }
        ctx.pointee.interrupt_callback.callback = { opaque in
            guard let opaque else { return 0 }
            return Unmanaged<CancelFlag>.fromOpaque(opaque).takeUnretainedValue().isCancelled ? 1 : 0
        }
        ctx.pointee.interrupt_callback.opaque = Unmanaged.passUnretained(cancel).toOpaque()
        // A live stream's first second tells its codecs; waiting the default 5 s only delays the start.
        ctx.pointee.max_analyze_duration = Int64(analyzeSeconds * 1e6)
        // Nor wait for 20 pictures to guess a frame rate the caller does not use.
        ctx.pointee.fps_probe_size = 0
        return ctx
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
