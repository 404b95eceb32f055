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
        for i in 0..<Int(input.context.pointee.nb_streams) {
            let st = input.stream(i)
            let timeBase = Rational(st.pointee.time_base)
            map[i] = (try output.addStream(st.pointee.codecpar, timeBase: timeBase), timeBase)
            // The display matrix (a phone's rotation) and the like travel with the stream.
            let out = output.context.pointee.streams[map[i]!.index]!
            // Unprobed, the journal's AAC track does not state its frame size and the MP4 muxer
            // warns on every clean end; AAC LC (what the aac node writes) codes 1024 samples a frame.
            if let par = out.pointee.codecpar, par.pointee.codec_type == AVMEDIA_TYPE_AUDIO,
               par.pointee.codec_id == AV_CODEC_ID_AAC, par.pointee.frame_size == 0 {
                par.pointee.frame_size = 1024
            }
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
}
