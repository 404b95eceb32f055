import CFFmpeg
import Foundation

/// Copies a media file's packets into a new file of the same streams (no decoding): how a
/// fragmented recording becomes a regular MP4 with its index in front at a clean end.
public enum Remuxer {
    /// Writes every packet of `source` to `destination` as `format`, with muxer `options`
    /// (e.g. `movflags: +faststart`). Returns the number of packets copied.
    @discardableResult
    public static func copy(from source: String, to destination: String, format: String, options: [String: String]) throws -> Int {
        // An MP4 journal's moov describes every stream; probing would decode frames for
        // nothing (~5 MB of decoder state at 720p, at the end of a phone's recording).
        let input = try Demuxer(path: source, probe: format != "mp4" && format != "mov")
        let output = try Muxer(path: destination, format: format)
        var map: [Int: (index: Int, timeBase: Rational)] = [:]
        var opus: Set<Int> = []
        for i in 0..<Int(input.context.pointee.nb_streams) {
            let st = input.stream(i)
            let timeBase = Rational(st.pointee.time_base)
            map[i] = (try output.addStream(st.pointee.codecpar, timeBase: timeBase), timeBase)
            // The display matrix (a phone's rotation) and the like travel with the stream.
            let out = output.context.pointee.streams[map[i]!.index]!
            // Unprobed, the journal's AAC track does not state its frame size and the MP4 muxer
            // warns on every clean end; AAC LC (what the aac node writes) codes 1024 samples a frame.
            // Opus frames vary (2.5 to 120 ms); its 20 ms default stands in, which only tells the
            // muxer the track is of variable-size packets (each packet's duration is set below).
            if let par = out.pointee.codecpar, par.pointee.codec_type == AVMEDIA_TYPE_AUDIO, par.pointee.frame_size == 0 {
                if par.pointee.codec_id == AV_CODEC_ID_AAC { par.pointee.frame_size = 1024 }
                if par.pointee.codec_id == AV_CODEC_ID_OPUS { par.pointee.frame_size = 960 }
            }
            if st.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_OPUS { opus.insert(i) }
            for s in 0..<Int(st.pointee.nb_side_data) {
                let side = st.pointee.side_data[s]
                if let data = av_stream_new_side_data(out, side.type, side.size) { data.update(from: side.data, count: side.size) }
            }
        }
        do {
            try output.writeHeader(options: options)
            let packet = av_packet_alloc()!
            defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
            var copied = 0
            while try input.read(into: packet) {
                guard let target = map[Int(packet.pointee.stream_index)] else { continue }
                // The journal's fragments leave Opus packets without a duration, and Opus states
                // no frame size to fall back on: the last packet would end the track at its start,
                // cutting the audio's end (the edit list) short by a packet.
                if packet.pointee.duration == 0, opus.contains(Int(packet.pointee.stream_index)),
                   let samples = opusSamples(packet.pointee.data, Int(packet.pointee.size)) {
                    packet.pointee.duration = Rational.rescale(Int64(samples), from: Rational(1, 48000), to: target.timeBase)
                }
                try output.write(packet, timeBase: target.timeBase, stream: target.index)
                copied += 1
            }
            try output.finish()
            return copied
        } catch {
            output.discard()
            throw error
        }
    }

    /// Samples (at 48 kHz, as Opus always counts) in one Opus packet, from its TOC byte (RFC 6716, 3.1).
    static func opusSamples(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int? {
        guard let data, size > 0 else { return nil }
        let config = Int(data[0] >> 3)
        let frame = switch config {
        case 0..<12: [480, 960, 1920, 2880][config & 3]      // SILK: 10, 20, 40, 60 ms
        case 12..<16: config & 1 == 0 ? 480 : 960           // hybrid: 10, 20 ms
        default: [120, 240, 480, 960][config & 3]          // CELT: 2.5, 5, 10, 20 ms
        }
        switch data[0] & 3 {
        case 0: return frame
        case 1, 2: return 2 * frame
        default: return size > 1 ? Int(data[1] & 0x3F) * frame : nil
        }
    }
}
