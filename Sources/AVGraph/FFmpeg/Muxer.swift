import CFFmpeg
import Foundation

/// A media file being written (libavformat's muxer): open, add streams, header, packets, trailer.
public final class Muxer {
    /// Container names by file extension, as `avformat_alloc_output_context2` knows them.
    public static let containers: [(ext: String, format: String)] = [
        ("mp4", "mp4"), ("mov", "mov"), ("mkv", "matroska"), ("flv", "flv"), ("ts", "mpegts"),
    ]

    public static func formatName(forPath path: String) -> String? {
        let ext = (path as NSString).pathExtension.lowercased()
        return containers.first { $0.ext == ext }?.format
    }

    /// Whether `container` can hold `codec` (nil when FFmpeg cannot tell, as for mpegts, which takes most codecs).
    public static func canHold(container: String, codec: String) -> Bool? {
        // The mov muxer's tag table lists these (MP4 shares it), yet its header refuses them
        // outside MP4 ("opus only supported in MP4"): answer what writing the file would.
        if container == "mov" && mp4Only.contains(codec) { return false }
        guard let ofmt = av_guess_format(container, nil, nil) else { return false }
        guard let desc = avcodec_descriptor_get_by_name(codec) else { return false }
        let r = avformat_query_codec(ofmt, desc.pointee.id, FF_COMPLIANCE_NORMAL)
        return r < 0 ? nil : r == 1
    }

    /// Codecs FFmpeg 5.1's mov muxer writes in MP4 mode only.
    static let mp4Only: Set<String> = ["opus", "flac", "truehd"]

    public let context: UnsafeMutablePointer<AVFormatContext>
    public let path: String
    public private(set) var headerWritten = false
    public private(set) var closed = false
    /// Set when the file is written as a journal (see `init(journalAt:format:)`).
    public let journal: JournalFile?

    /// Creates the file. Fails, naming the path, when it cannot be written.
    public init(path: String, format: String) throws {
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        try AVFailure.check(avformat_alloc_output_context2(&ctx, nil, format, path), "preparing \(format) output")
        guard let ctx else { throw MediaError("cannot prepare \(format) output") }
        context = ctx
        // A muxer that writes files of its own (hls: playlists and segments) gets no output here.
        let opensOwnFiles = (ctx.pointee.oformat.pointee.flags & avg_fmt_nofile()) != 0
        let opened = opensOwnFiles ? 0 : avio_open(&ctx.pointee.pb, path, avg_avio_write())
        if opened < 0 {
            avformat_free_context(ctx)
            throw MediaError("cannot write '\(path)': \(AVFailure.message(opened))")
        }
        self.path = path
        journal = nil
    }

    /// Creates the file as a journal: each unit the muxer completes (the header, a fragment,
    /// the trailer) reaches the file whole, so the file always ends at a boundary that plays.
    public init(journalAt path: String, format: String) throws {
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        try AVFailure.check(avformat_alloc_output_context2(&ctx, nil, format, path), "preparing \(format) output")
        guard let ctx else { throw MediaError("cannot prepare \(format) output") }
        do {
            // The unit each container's muxer completes in one call.
            let unit = ["mp4": "fragment", "mov": "fragment", "matroska": "cluster"][format] ?? "packet"
            let journal = try JournalFile(path: path, unit: unit)
            self.journal = journal
            ctx.pointee.pb = journal.io
            ctx.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        } catch {
            avformat_free_context(ctx)
            throw error
        }
        context = ctx
        self.path = path
    }

    deinit {
        if !closed { close() }
        avformat_free_context(context)
    }

    /// A new stream described by `parameters`; returns its index. `orientation`: written as the
    /// stream's display matrix (MP4/MOV put it in `tkhd`; containers without one ignore it).
    public func addStream(_ parameters: UnsafePointer<AVCodecParameters>, timeBase: Rational, orientation: Orientation = .up) throws -> Int {
        guard let st = avformat_new_stream(context, nil) else { throw MediaError("out of memory (avformat_new_stream)") }
        try AVFailure.check(avcodec_parameters_copy(st.pointee.codecpar, parameters), "avcodec_parameters_copy")
        // The tag of another container would be wrong here; the muxer picks its own.
        st.pointee.codecpar.pointee.codec_tag = 0
        st.pointee.time_base = timeBase.av
        if let matrix = orientation.displayMatrix {
            guard let data = av_stream_new_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, MemoryLayout<Int32>.size * 9) else {
                throw MediaError("out of memory (display matrix)")
            }
            matrix.withUnsafeBytes { data.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: $0.count) }
        }
        return Int(st.pointee.index)
    }

    public var streamCount: Int { Int(context.pointee.nb_streams) }

    public func streamTimeBase(_ index: Int) -> Rational { Rational(context.pointee.streams[index]!.pointee.time_base) }

    public func writeHeader(options: [String: String]) throws {
        var dict: OpaquePointer?
        for (k, v) in options { av_dict_set(&dict, k, v, 0) }
        defer { av_dict_free(&dict) }
        try journaled { try AVFailure.check(avformat_write_header(context, &dict), "writing the header of '\(path)'") }
        headerWritten = true
    }

    /// Runs a muxer call, then commits what it completed to the journal; a write failure is
    /// reported as the journal saw it (the disk is full...), not as FFmpeg's echo of it.
    private func journaled(_ call: () throws -> Void) throws {
        do {
            try call()
            try journal?.commit()
        } catch {
            if let failure = journal?.failure { throw failure }
            throw error
        }
    }

    /// Writes `packet` (timestamps in `timeBase`) to stream `index`; takes its data reference.
    public func write(_ packet: UnsafeMutablePointer<AVPacket>, timeBase: Rational, stream index: Int) throws {
        av_packet_rescale_ts(packet, timeBase.av, streamTimeBase(index).av)
        packet.pointee.stream_index = Int32(index)
        packet.pointee.pos = -1
        try journaled { try AVFailure.check(av_interleaved_write_frame(context, packet), "writing '\(path)'") }
    }

    /// Writes the trailer (index, `moov`) and closes the file.
    public func finish() throws {
        guard !closed else { return }
        defer { close() }
        if headerWritten, journal?.failure == nil {
            try journaled { try AVFailure.check(av_write_trailer(context), "finishing '\(path)'") }
        }
        if let failure = journal?.failure { throw failure }
    }

    private func close() {
        closed = true
        if let journal {
            journal.close()
            context.pointee.pb = nil
        } else {
            avio_closep(&context.pointee.pb)
        }
    }

    /// Closes and deletes the file (nothing playable was written).
    public func discard() {
        if !closed { close() }
        try? FileManager.default.removeItem(atPath: path)
    }
}
