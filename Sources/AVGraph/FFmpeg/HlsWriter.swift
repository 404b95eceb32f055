import CFFmpeg
import Foundation

/// An HLS presentation being written: libavformat's `hls` muxer with one variant stream per
/// rendition (`var_stream_map`), each a folder beside the master playlist with its own media
/// playlist and segments, the audio copied into every rendition.
///
/// Why FFmpeg's segmenter and not our own: in FFmpeg 5.1 `hlsenc` gathers each segment in
/// memory and writes it whole when it is cut (to `NAME.tmp` with `temp_file`, renamed once
/// closed), and only then rewrites the media playlist, itself to `index.m3u8.tmp` renamed over the
/// old one. So at every instant the playlist on disk names only renamed, complete segments, and a
/// kill -9 leaves at most a `.tmp` segment nobody names. The master playlist is ours (5.1 writes
/// no FRAME-RATE): written once every media playlist exists, whole, to a temporary renamed over it.
public final class HlsWriter {
    public enum SegmentFormat: String, CaseIterable, Sendable { case fmp4, ts }

    public struct Rendition {
        /// The rendition's folder under the master playlist's (`1080p`).
        public var name: String
        public var video: EncodedStream
        public var frameRate: Rational
        public init(name: String, video: EncodedStream, frameRate: Rational) {
            self.name = name
            self.video = video
            self.frameRate = frameRate
        }
    }

    public let masterPath: String
    public let folder: String
    private let renditions: [Rendition]
    private let audio: EncodedStream?
    private let muxer: Muxer
    private let format: SegmentFormat
    private var masterWritten = false
    /// Bytes and media span written per rendition: the BANDWIDTH of a rendition without a declared bit rate.
    private var bytes: [Int]
    private var span: [(first: Int64, last: Int64)?]

    /// `window`: segments in each media playlist, older ones deleted; nil keeps all (an EVENT playlist).
    public init(master masterPath: String, renditions: [Rendition], audio: EncodedStream?, segmentSeconds: Double,
                window: Int?, format: SegmentFormat) throws {
        self.masterPath = masterPath
        self.renditions = renditions
        self.audio = audio
        self.format = format
        folder = (masterPath as NSString).deletingLastPathComponent
        bytes = Array(repeating: 0, count: renditions.count)
        span = Array(repeating: nil, count: renditions.count)
        let ext = format == .fmp4 ? "m4s" : "ts"
        muxer = try Muxer(path: "\(folder)/%v/index.m3u8", format: "hls")
        for r in renditions {
            _ = try muxer.addStream(r.video.parameters, timeBase: r.video.timeBase)
            if let audio { _ = try muxer.addStream(audio.parameters, timeBase: audio.timeBase) }
        }
        let map = renditions.indices.map { i in
            (audio == nil ? "v:\(i)" : "v:\(i),a:\(i)") + ",name:\(renditions[i].name)"
        }
        var flags = "temp_file+program_date_time+independent_segments"
        if window != nil { flags += "+delete_segments" }
        var options = [
            "hls_time": String(segmentSeconds),
            "hls_list_size": String(window ?? 0),
            "hls_segment_type": format == .fmp4 ? "fmp4" : "mpegts",
            "hls_flags": flags,
            "hls_segment_filename": "\(folder)/%v/seg_%05d.\(ext)",
            "var_stream_map": map.joined(separator: " "),
        ]
        if format == .fmp4 { options["hls_fmp4_init_filename"] = "init.mp4" }
        if window == nil { options["hls_playlist_type"] = "event" }
        try muxer.writeHeader(options: options)
    }

    /// The media playlist of rendition `i`.
    public func playlist(_ i: Int) -> String { "\(folder)/\(renditions[i].name)/index.m3u8" }

    /// A video packet of rendition `i`.
    public func write(video packet: Packet, rendition i: Int) throws {
        bytes[i] += packet.byteCount
        let t = packet.pts
        span[i] = (span[i]?.first ?? t, t)
        let stream = audio == nil ? i : 2 * i
        // The muxer takes the packet's content: what it says is read first.
        let keyframe = packet.isKeyframe
        // The muxer takes the packet's data reference; the caller's Packet keeps the AVPacket alive.
        try withExtendedLifetime(packet) { try muxer.write(packet.av, timeBase: packet.timeBase, stream: stream) }
        if !masterWritten && keyframe { try writeMasterWhenReady() }
    }

    /// An audio packet, into every rendition.
    public func write(audio packet: Packet) throws {
        for i in renditions.indices {
            let copy = packet.ref()
            try withExtendedLifetime(copy) { try muxer.write(copy.av, timeBase: copy.timeBase, stream: 2 * i + 1) }
        }
    }

    /// Cuts the last segments and ends every media playlist (`#EXT-X-ENDLIST`).
    public func finish() throws {
        try muxer.finish()
        try writeMasterWhenReady()
    }

    private func writeMasterWhenReady() throws {
        guard !masterWritten, renditions.indices.allSatisfy({ FileManager.default.fileExists(atPath: playlist($0)) }) else { return }
        let text = Self.master(renditions, audio: audio, version: format == .fmp4 ? 7 : 6, bandwidth: bandwidth)
        // Foundation's atomic write: a temporary beside the file, renamed over it.
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: masterPath), options: .atomic)
        } catch {
            throw MediaError("cannot write the master playlist '\(masterPath)': \(error.localizedDescription)")
        }
        masterWritten = true
    }

    /// A master playlist naming each rendition's `NAME/index.m3u8` with its size, codecs, frame rate
    /// and `bandwidth(i)`.
    public static func master(_ renditions: [Rendition], audio: EncodedStream?, version: Int, bandwidth: (Int) -> Int) -> String {
        var text = "#EXTM3U\n#EXT-X-VERSION:\(version)\n#EXT-X-INDEPENDENT-SEGMENTS\n"
        for (i, r) in renditions.enumerated() {
            let v = r.video.parameters.pointee
            let codecs = [HlsCodecs.name(of: r.video.parameters), audio.map { HlsCodecs.name(of: $0.parameters) }].compactMap { $0 }
            text += "#EXT-X-STREAM-INF:BANDWIDTH=\(bandwidth(i)),RESOLUTION=\(v.width)x\(v.height)"
            if !codecs.contains(where: \.isEmpty) { text += ",CODECS=\"\(codecs.joined(separator: ","))\"" }
            text += String(format: ",FRAME-RATE=%.3f\n", r.frameRate.double)
            text += "\(r.name)/index.m3u8\n"
        }
        return text
    }

    /// Peak bits a second a player must have for rendition `i`: the declared bit rates (video + audio)
    /// with 10 % of room, as ffmpeg's hls muxer counts; measured so far when the encoder declared none.
    private func bandwidth(_ i: Int) -> Int {
        let measured = span[i].map { s in (bytes: bytes[i], seconds: Double(s.last - s.first) * renditions[i].video.timeBase.double) }
        return Self.bandwidth(video: renditions[i].video, audio: audio, measured: measured)
    }

    /// The declared bit rates (video + audio) with 10 % of room; the video's as measured when its encoder declared none.
    public static func bandwidth(video stream: EncodedStream, audio: EncodedStream?, measured: (bytes: Int, seconds: Double)?) -> Int {
        var video = Int(stream.parameters.pointee.bit_rate)
        if video <= 0, let measured { video = Int(Double(measured.bytes * 8) / max(measured.seconds, 1)) }
        let total = video + Int(audio?.parameters.pointee.bit_rate ?? 0)
        return total + total / 10
    }

    /// The run failed elsewhere: end the playlists as they are.
    public func abort() {
        try? muxer.finish()
    }
}

/// RFC 6381 codec names for a master playlist's CODECS attribute.
public enum HlsCodecs {
    /// `avc1.PPCCLL` from the SPS (profile, constraint flags, level), `mp4a.40.N` for AAC; empty when unknown.
    public static func name(of parameters: UnsafePointer<AVCodecParameters>) -> String {
        let p = parameters.pointee
        switch p.codec_id {
        case AV_CODEC_ID_H264:
            guard let sps = spsHeader(p.extradata, Int(p.extradata_size)) else { return "" }
            return String(format: "avc1.%02x%02x%02x", sps.0, sps.1, sps.2)
        case AV_CODEC_ID_AAC:
            // MPEG-4 audio object type = FFmpeg's AAC profile + 1 (LC: 2).
            return "mp4a.40.\(p.profile >= 0 ? p.profile + 1 : 2)"
        default:
            return ""
        }
    }

    /// profile_idc, constraint flags, level_idc of the first SPS, from avcC or Annex B extradata.
    static func spsHeader(_ data: UnsafeMutablePointer<UInt8>?, _ size: Int) -> (UInt8, UInt8, UInt8)? {
        guard let data, size >= 4 else { return nil }
        if data[0] == 1 { return (data[1], data[2], data[3]) }
        var i = 0
        while i + 6 < size {
            if data[i] == 0, data[i + 1] == 0, data[i + 2] == 1, data[i + 3] & 0x1f == 7 {
                return (data[i + 4], data[i + 5], data[i + 6])
            }
            i += 1
        }
        return nil
    }
}
