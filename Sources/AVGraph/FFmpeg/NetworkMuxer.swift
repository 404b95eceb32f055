import CFFmpeg
import Foundation

/// Lets another thread cut short whatever a `NetworkMuxer` is blocked in (connecting, writing to
/// a stalled peer): libavformat polls it through its interrupt callback about every 100 ms, a
/// `MuxerTransport` between the slices it waits in.
public final class CancelFlag: Sendable {
    private let cancelled = ConditionLock(false)

    public init() {}

    public func cancel() {
        cancelled.withLockWakingAll { $0 = true }
    }

    public var isCancelled: Bool { cancelled.withLock { $0 } }

    /// Waits `seconds` (a backoff) unless cancelled first; true when cancelled. A cancel ends the wait at once.
    @discardableResult
    public func wait(seconds: Double) -> Bool {
        cancelled.wait(until: Monotonic.now + seconds) { $0 ? true : nil } ?? false
    }
}

/// A live stream's socket: a TCP socket (rtmp://) or a libsrt socket (srt://).
public enum UplinkSocket: Sendable, Equatable {
    case tcp(Int32)
    case srt(Int32)
}

/// A live stream sent to a server: libavformat's muxer writing either into a protocol it opens
/// itself (FLV over rtmp://) or into a `MuxerTransport` avgraph connected (MPEG-TS over the `srt`
/// sink's libsrt socket). Unlike a file, the other end can vanish or stall: every blocking call
/// can be cancelled, and a peer that takes nothing for `timeout` seconds is an error instead of
/// a hang. One session per instance; a reconnect makes a new one (a fresh header, as servers expect).
public final class NetworkMuxer {
    public let url: String
    private let context: UnsafeMutablePointer<AVFormatContext>
    /// Retained here: libavformat only holds a raw pointer to it.
    private let cancel: CancelFlag
    public private(set) var headerWritten = false
    private var closed = false
    /// Set when avgraph holds the connection itself: the context writes into `transport` through `io`.
    private var custom: (io: WriteCallbackIO, link: TransportLink)?

    /// The transport and its last failure, apart from the muxer so the write closure holds no cycle.
    private final class TransportLink {
        let transport: MuxerTransport
        var failure: Error?
        init(_ transport: MuxerTransport) { self.transport = transport }
    }

    /// Connects to `url`; fails with the protocol's reason (refused, timed out, cancelled).
    /// `protocolOptions` go to the protocol (libsrt's `linger`, ...).
    public init(url: String, format: String, timeout: Double, cancel: CancelFlag, protocolOptions: [String: String] = [:]) throws {
        self.url = url
        self.cancel = cancel
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        try AVFailure.check(avformat_alloc_output_context2(&ctx, nil, format, url), "preparing \(format) output")
        guard let ctx else { throw MediaError("cannot prepare \(format) output") }
        context = ctx
        ctx.pointee.interrupt_callback.callback = { opaque in
            guard let opaque else { return 0 }
            return Unmanaged<CancelFlag>.fromOpaque(opaque).takeUnretainedValue().isCancelled ? 1 : 0
        }
        ctx.pointee.interrupt_callback.opaque = Unmanaged.passUnretained(cancel).toOpaque()
        var options: OpaquePointer?
        // Microseconds without progress before a read or write gives up (a peer gone silent).
        av_dict_set(&options, "rw_timeout", String(Int64(timeout * 1e6)), 0)
        // A small socket buffer (the kernel doubles it) keeps a congested link's backlog in the
        // caller's queue, where it is measured and dropped by policy, instead of seconds of it
        // hidden in the kernel. Still enough for ~10 Mbit/s at 100 ms round trip.
        av_dict_set(&options, "send_buffer_size", "65536", 0)
        for (k, v) in protocolOptions { av_dict_set(&options, k, v, 0) }
        defer { av_dict_free(&options) }
        let opened = avio_open2(&ctx.pointee.pb, url, avg_avio_write(), &ctx.pointee.interrupt_callback, &options)
        if opened < 0 {
            // Fully initialised by now, so deinit runs and frees the context.
            closed = true
            throw MediaError(AVFailure.message(opened))
        }
    }

    /// Writes `format` into `transport`, already connected (`url` is the redacted address, for
    /// messages). Each write is at most `packetSize` bytes (whole container packets, e.g. 7 TS
    /// packets for an SRT live message), handed over only once that much is ready or the
    /// session ends. A failed send fails the muxer's call with the transport's own error.
    public init(transport: MuxerTransport, url: String, format: String, packetSize: Int, cancel: CancelFlag) throws {
        self.url = url
        self.cancel = cancel
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        do {
            try AVFailure.check(avformat_alloc_output_context2(&ctx, nil, format, nil), "preparing \(format) output")
        } catch {
            transport.close(graceful: false)
            throw error
        }
        guard let ctx else {
            transport.close(graceful: false)
            throw MediaError("cannot prepare \(format) output")
        }
        context = ctx
        let link = TransportLink(transport)
        let io: WriteCallbackIO
        do {
            io = try WriteCallbackIO(bufferSize: packetSize) { bytes in
                guard link.failure == nil else { return avg_averror(EIO) }
                do {
                    try link.transport.send(bytes)
                    return 0
                } catch {
                    link.failure = error
                    return avg_averror(EIO)
                }
            }
        } catch {
            closed = true
            transport.close(graceful: false)
            throw error
        }
        custom = (io, link)
        ctx.pointee.pb = io.context
        ctx.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        // libavformat would flush after every packet on a custom context (its minimum packet
        // size is 0): short messages for each audio frame. Full messages leave as they fill.
        ctx.pointee.flush_packets = 0
    }

    deinit {
        if !closed { close() }
        avformat_free_context(context)
    }

    /// Runs a libavformat call that may write; a transport's failure is thrown as itself
    /// (libsrt's reason) rather than as the I/O error libavformat saw.
    private func writing(_ call: () throws -> Void) throws {
        do { try call() } catch {
            if let failure = custom?.link.failure { throw failure }
            throw error
        }
    }

    /// The socket the stream leaves by, for reading how the uplink copes (TCP_INFO, srt_bstats):
    /// the transport's own (the `srt` sink's libsrt socket); nil for a URL libavformat opened
    /// itself, whose socket is private to it. Valid until `close`.
    public var uplinkSocket: UplinkSocket? {
        guard !closed else { return nil }
        return custom?.link.transport.uplinkSocket
    }

    public func addStream(_ parameters: UnsafePointer<AVCodecParameters>, timeBase: Rational) throws -> Int {
        guard let st = avformat_new_stream(context, nil) else { throw MediaError("out of memory (avformat_new_stream)") }
        try AVFailure.check(avcodec_parameters_copy(st.pointee.codecpar, parameters), "avcodec_parameters_copy")
        st.pointee.codecpar.pointee.codec_tag = 0
        st.pointee.time_base = timeBase.av
        return Int(st.pointee.index)
    }

    public func writeHeader(options: [String: String] = [:]) throws {
        var dict: OpaquePointer?
        for (k, v) in options { av_dict_set(&dict, k, v, 0) }
        defer { av_dict_free(&dict) }
        try writing { try AVFailure.check(avformat_write_header(context, &dict), "sending the stream header") }
        headerWritten = true
    }

    /// Sends `packet` (timestamps in `timeBase`) on stream `index` at once: the caller already
    /// orders packets by time, and libavformat's interleaving queue would hold media (and
    /// memory) out of sight while one stream pauses. Blocks while the network is slower than
    /// the stream: call it from a thread of its own.
    public func write(_ packet: UnsafeMutablePointer<AVPacket>, timeBase: Rational, stream index: Int) throws {
        let st = context.pointee.streams[index]!
        av_packet_rescale_ts(packet, timeBase.av, st.pointee.time_base)
        packet.pointee.stream_index = Int32(index)
        packet.pointee.pos = -1
        try writing { try AVFailure.check(av_write_frame(context, packet), "sending") }
    }

    /// Ends the session cleanly (what is interleaved, then the trailer) and hangs up.
    public func finish() throws {
        guard !closed else { return }
        var ended = false
        defer { hangUp(graceful: ended) }
        if headerWritten { try writing { try AVFailure.check(av_write_trailer(context), "ending the stream") } }
        ended = true
    }

    /// Hangs up without a trailer (the connection is already broken).
    public func close() { hangUp(graceful: false) }

    private func hangUp(graceful: Bool) {
        guard !closed else { return }
        closed = true
        if let custom {
            // The context only borrows the transport's AVIOContext (freed with `io`).
            context.pointee.pb = nil
            custom.link.transport.close(graceful: graceful)
        } else {
            avio_closep(&context.pointee.pb)
        }
    }
}
