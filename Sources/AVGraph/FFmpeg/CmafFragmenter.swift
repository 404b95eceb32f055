import CFFmpeg
import Foundation

/// Fragmented MP4 in memory, one video track and at most one audio track: the init segment
/// (`ftyp` + an empty `moov`) once, then a `moof`/`mdat` pair each time `cut()` is called with
/// the samples added since. libavformat's mp4 muxer does the boxes (`frag_custom`: a fragment
/// only when asked); we only decide where fragments end, as LL-HLS needs (a chunk per picture,
/// parts of 200 ms, segments at keyframes).
///
/// Timestamps are taken as given, in seconds from an origin the caller shares between every
/// fragmenter of a presentation, so `tfdt` is the same timeline in every rendition (a player
/// switching between them lands on the same times): `frag_discont` makes each track's first
/// `tfdt` its first packet's time instead of zero, and negative timestamps are not shifted.
public final class CmafFragmenter {
    public private(set) var initSegment: [UInt8] = []
    private let context: UnsafeMutablePointer<AVFormatContext>
    private var io: WriteCallbackIO?
    private let output = OutputBytes()
    private let timeBases: [Rational]
    private var wroteSamples = false

    private final class OutputBytes {
        var bytes: [UInt8] = []
    }

    /// Tracks in the order given: video first, then the audio if any.
    public init(video: EncodedStream, audio: EncodedStream?) throws {
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        try AVFailure.check(avformat_alloc_output_context2(&ctx, nil, "mp4", nil), "preparing fragmented mp4")
        guard let ctx else { throw MediaError("cannot prepare fragmented mp4") }
        context = ctx
        let sink = output
        do {
            io = try WriteCallbackIO(bufferSize: 64 * 1024) { bytes in
                sink.bytes.append(contentsOf: bytes)
                return 0
            }
        } catch {
            avformat_free_context(ctx)
            throw error
        }
        ctx.pointee.pb = io?.context
        ctx.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        for stream in [video] + (audio.map { [$0] } ?? []) {
            guard let st = avformat_new_stream(ctx, nil) else { throw MediaError("out of memory (avformat_new_stream)") }
            try AVFailure.check(avcodec_parameters_copy(st.pointee.codecpar, stream.parameters), "avcodec_parameters_copy")
            st.pointee.codecpar.pointee.codec_tag = 0
            // A fine clock for every track: each packet's seconds land on it without rounding drift.
            st.pointee.time_base = AVRational(num: 1, den: stream.kind == .encodedAudio ? stream.parameters.pointee.sample_rate : 90000)
        }
        var dict: OpaquePointer?
        av_dict_set(&dict, "movflags", "frag_custom+empty_moov+default_base_moof+frag_discont", 0)
        av_dict_set(&dict, "avoid_negative_ts", "disabled", 0)
        av_dict_set(&dict, "use_editlist", "0", 0)
        defer { av_dict_free(&dict) }
        try AVFailure.check(avformat_write_header(ctx, &dict), "writing an init segment")
        // The track time bases the muxer chose (it may refine ours).
        timeBases = (0..<Int(ctx.pointee.nb_streams)).map { Rational(ctx.pointee.streams[$0]!.pointee.time_base) }
        avio_flush(ctx.pointee.pb)
        initSegment = output.bytes
        output.bytes.removeAll(keepingCapacity: true)
    }

    deinit {
        avformat_free_context(context)
    }

    /// Adds a packet to track `track` (0: video, 1: audio) at `seconds` from the shared origin
    /// (its decode time `dtsSeconds`), lasting `duration` seconds. The muxer copies the bytes.
    public func add(_ packet: Packet, track: Int, seconds: Double, dtsSeconds: Double, duration: Double) throws {
        let base = timeBases[track]
        let copy = packet.ref()
        copy.av.pointee.pts = Int64((seconds / base.double).rounded())
        copy.av.pointee.dts = Int64((dtsSeconds / base.double).rounded())
        copy.av.pointee.duration = Int64((duration / base.double).rounded())
        copy.av.pointee.stream_index = Int32(track)
        copy.av.pointee.pos = -1
        try AVFailure.check(av_write_frame(context, copy.av), "adding a sample to a fragment")
        wroteSamples = true
    }

    /// The `moof`/`mdat` of the samples added since the last cut; empty when there were none.
    public func cut() throws -> [UInt8] {
        guard wroteSamples else { return [] }
        wroteSamples = false
        try AVFailure.check(av_write_frame(context, nil), "closing a fragment")
        avio_flush(context.pointee.pb)
        defer { output.bytes.removeAll(keepingCapacity: true) }
        return output.bytes
    }
}
