import AVGraph
import CFFmpeg
import Foundation

/// avgraph's own FLV reader for the publishers of its RTMP server, in place of libavformat's
/// flv demuxer (FFmpeg 5.1's knows neither Enhanced RTMP nor HEVC as codec id 12): it reads
/// the tags RtmpConnection writes, builds the packets and codec parameters itself (extradata
/// from the sequence headers: avcC, hvcC, av1C, vpcC, AAC's AudioSpecificConfig; pts = dts +
/// composition time) and hands a new sequence header on as new extradata on the next picture
/// (a phone turned mid-stream: a new size).
package final class FlvTagReader: PacketSource {
    private struct Tag {
        var type: UInt8
        var time: Int64
        var body: ArraySlice<UInt8>
    }

    private enum Item {
        case video(FlvVideoPacket, time: Int64)
        case audio(FlvAudioPacket, time: Int64)
    }

    /// One stream's codec and the configuration the decoder holds.
    private final class Track {
        let index: Int
        let parameters: CodecParameters
        var extradata: [UInt8]
        /// A configuration record that differs from the decoder's: goes with the next packet.
        var newExtradata: [UInt8]?
        init(index: Int, parameters: CodecParameters, extradata: [UInt8]) {
            self.index = index
            self.parameters = parameters
            self.extradata = extradata
        }
    }

    /// How long (of the stream's own time) the first tags are read to learn its streams: as
    /// long as libavformat analysed a live FLV stream before.
    package static let probeMilliseconds: Int64 = 1000
    /// Bytes of tags held while probing, at most.
    package static let probeBytes = 8 << 20

    private let name: String
    private let warn: (String) -> Void
    /// Each data tag's name, values and time (ms), as `RtmpPolicy.onData` (a stream relayed by
    /// `avgraph serve`: the run reads its publisher's `onPrivacy` here).
    private let onData: ((String, [Amf0Value], UInt32) -> Void)?
    private let readBytes: (UnsafeMutableRawBufferPointer) -> Int
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    private var position = 0
    private var videoReader = FlvVideoReader()
    private var audioReader = FlvAudioReader()
    private var warnedTracks: Set<String> = []
    private var audioIgnored = false
    private var pending: [Item] = []
    private var pendingHead = 0
    private var video: Track?
    private var videoCodec: FlvVideoCodec?
    private var audio: Track?
    private var audioCodec: AVCodecID?

    /// Reads the FLV header and the first tags (up to `probeMilliseconds` of media, less when
    /// the publisher's metadata names its streams and both have come). `read` blocks for bytes
    /// and returns 0 at the end; `warn` says what is ignored.
    package init(name: String, warn: @escaping (String) -> Void, onData: ((String, [Amf0Value], UInt32) -> Void)? = nil,
         read: @escaping (UnsafeMutableRawBufferPointer) -> Int) throws {
        self.name = name
        self.warn = warn
        self.onData = onData
        readBytes = read
        guard try fill(13), buffer[0..<3].elementsEqual("FLV".utf8) else { throw MediaError("\(name): not an FLV stream") }
        let offset = Int(buffer[5]) << 24 | Int(buffer[6]) << 16 | Int(buffer[7]) << 8 | Int(buffer[8])
        guard offset >= 9, try fill(offset + 4) else { throw MediaError("\(name): the FLV stream ended in its header") }
        position = offset + 4
        try probe()
    }

    /// A reader without a data hook (the unit tests').
    package convenience init(name: String, warn: @escaping (String) -> Void, read: @escaping (UnsafeMutableRawBufferPointer) -> Int) throws {
        try self.init(name: name, warn: warn, onData: nil, read: read)
    }

    private func probe() throws {
        var expectsVideo = true, expectsAudio = true
        var firstTime: Int64?
        var held = 0
        while video == nil && expectsVideo || audio == nil && expectsAudio {
            guard let tag = try nextTag() else { break }
            held += tag.body.count
            if tag.type == 18 {
                data(tag)
                // onMetaData names the streams to come: no need to wait for one it does not name.
                if Amf0.leadingString(tag.body) == "onMetaData", let values = try? Amf0.decodeAll(tag.body), values.count > 1 {
                    expectsVideo = values[1]["videocodecid"] != nil || values[1]["width"] != nil
                    expectsAudio = values[1]["audiocodecid"] != nil || values[1]["audiosamplerate"] != nil
                }
                continue
            }
            let before = pending.count
            try parse(tag)
            for item in pending[before...] { try learn(item) }
            if tag.type == 8 || tag.type == 9 {
                if firstTime == nil { firstTime = tag.time }
                if tag.time - firstTime! >= Self.probeMilliseconds || held > Self.probeBytes { break }
            }
        }
        if video == nil && audio == nil { throw MediaError("\(name): sent no audio or video avgraph can decode") }
    }

    /// Streams come from the first configuration (or, for codecs that need none, the first frame).
    private func learn(_ item: Item) throws {
        switch item {
        case .video(let p, _) where video == nil:
            let configured = p.kind == .sequenceStart
            guard configured || p.codec == .av1 || p.codec == .vp9 else { return }
            let sizes = configured ? VideoSequenceSize.of(p.codec, config: p.body)
                : VideoSequenceSize.of(p.codec, frames: p.body, nalLengthSize: 4)
            let extradata = configured ? Array(p.body) : []
            let parameters = try CodecParameters(video: Self.codecID(p.codec), width: sizes.first?.width ?? 0,
                                                 height: sizes.first?.height ?? 0, extradata: extradata)
            video = Track(index: audio == nil ? 0 : 1, parameters: parameters, extradata: extradata)
            videoCodec = p.codec
        case .audio(let p, _) where audio == nil:
            let configured = p.kind == .sequenceStart
            let needsConfig = [AV_CODEC_ID_AAC, AV_CODEC_ID_OPUS, AV_CODEC_ID_FLAC].contains(p.codec)
            guard configured || !needsConfig else { return }
            var rate = p.sampleRate, channels = p.channels
            if p.codec == AV_CODEC_ID_AAC, let c = FlvAudio.aacConfig(p.body) { (rate, channels) = c }
            if p.codec == AV_CODEC_ID_OPUS {
                rate = 48000
                if p.body.count > 9 { channels = Int(p.body[p.body.startIndex + 9]) }
            }
            let extradata = configured ? Array(p.body) : []
            let parameters = try CodecParameters(audio: p.codec, sampleRate: rate, channels: channels, extradata: extradata)
            audio = Track(index: video == nil ? 0 : 1, parameters: parameters, extradata: extradata)
            audioCodec = p.codec
        default: break
        }
    }

    private static func codecID(_ codec: FlvVideoCodec) -> AVCodecID {
        switch codec {
        case .h264: AV_CODEC_ID_H264
        case .hevc: AV_CODEC_ID_HEVC
        case .av1: AV_CODEC_ID_AV1
        case .vp9: AV_CODEC_ID_VP9
        }
    }

    // MARK: PacketSource

    package func bestStream(_ type: AVMediaType) -> Int? {
        (type == AVMEDIA_TYPE_VIDEO ? video : type == AVMEDIA_TYPE_AUDIO ? audio : nil)?.index
    }

    package func parameters(_ stream: Int) -> UnsafePointer<AVCodecParameters> {
        UnsafePointer((video?.index == stream ? video! : audio!).parameters.pointer)
    }

    package func timeBase(_ stream: Int) -> Rational { Rational(1, 1000) }

    package func orientation(_ stream: Int) -> Orientation { .up }

    package func read(into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        while true {
            while pendingHead < pending.count {
                let item = pending[pendingHead]
                pendingHead += 1
                if try build(item, into: packet) { return true }
            }
            pending.removeAll(keepingCapacity: true)
            pendingHead = 0
            guard let tag = try nextTag() else { return false }
            try parse(tag)
        }
    }

    /// A packet of `item`, or false when it makes none (a configuration, a stream not decoded).
    private func build(_ item: Item, into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        switch item {
        case .video(let p, let time):
            guard let track = video else { return false }
            guard p.codec == videoCodec else {
                throw MediaError("\(name): changed its video codec mid-stream (\(videoCodec?.rawValue ?? "") to \(p.codec.rawValue))")
            }
            if p.kind == .sequenceStart {
                if !p.body.elementsEqual(track.extradata) {
                    track.extradata = Array(p.body)
                    track.newExtradata = track.extradata
                }
                return false
            }
            try BuiltPacket.fill(packet, bytes: p.body, stream: track.index, pts: time + Int64(p.compositionTime), dts: time,
                                 key: p.key, newExtradata: track.newExtradata)
            track.newExtradata = nil
            return true
        case .audio(let p, let time):
            guard let track = audio, p.codec == audioCodec else { return false }
            if p.kind == .sequenceStart {
                if !p.body.elementsEqual(track.extradata) {
                    track.extradata = Array(p.body)
                    track.newExtradata = track.extradata
                }
                return false
            }
            try BuiltPacket.fill(packet, bytes: p.body, stream: track.index, pts: time, dts: time, key: true, newExtradata: track.newExtradata)
            track.newExtradata = nil
            return true
        }
    }

    private func parse(_ tag: Tag) throws {
        switch tag.type {
        case 9:
            do { pending += try videoReader.read(tag.body).map { Item.video($0, time: tag.time) } } catch {
                throw MediaError("\(name): \(error)")
            }
        case 8 where !audioIgnored:
            // Audio avgraph cannot decode costs the audio, not the pictures.
            do { pending += try audioReader.read(tag.body).map { Item.audio($0, time: tag.time) } } catch {
                audioIgnored = true
                warn("\(name): \(error): its audio is ignored")
            }
        case 18:
            data(tag)
            return
        default: return
        }
        noteIgnoredTracks("video", videoReader.tracks)
        noteIgnoredTracks("audio", audioReader.tracks)
    }

    private func data(_ tag: Tag) {
        guard let onData, let name = Amf0.leadingString(tag.body), let values = try? Amf0.decodeAll(tag.body) else { return }
        onData(name, Array(values.dropFirst()), UInt32(truncatingIfNeeded: tag.time))
    }

    private func noteIgnoredTracks(_ kind: String, _ tracks: FlvExTracks) {
        guard tracks.otherTracksIgnored, let kept = tracks.track, !warnedTracks.contains(kind) else { return }
        warnedTracks.insert(kind)
        warn("\(name) sends several \(kind) tracks (Enhanced RTMP multitrack): track \(kept) is decoded, the others are ignored")
    }

    // MARK: bytes

    /// The next tag, nil at the end of the stream (a tag cut short by the end is dropped).
    private func nextTag() throws -> Tag? {
        guard try fill(11) else { return nil }
        let h = position
        let type = buffer[h] & 0x1F
        let size = Int(buffer[h + 1]) << 16 | Int(buffer[h + 2]) << 8 | Int(buffer[h + 3])
        let time = Int64(buffer[h + 7]) << 24 | Int64(buffer[h + 4]) << 16 | Int64(buffer[h + 5]) << 8 | Int64(buffer[h + 6])
        guard try fill(11 + size + 4) else { return nil }
        let body = Array(buffer[(h + 11)..<(h + 11 + size)])
        position += 11 + size + 4
        return Tag(type: type, time: time, body: body[...])
    }

    /// Reads until `count` bytes past `position` are buffered; false when the stream ends first.
    private func fill(_ count: Int) throws -> Bool {
        if position > 1 << 20 && position * 2 > buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
        while buffer.count - position < count {
            let n = chunk.withUnsafeMutableBytes { readBytes($0) }
            if n <= 0 { return false }
            buffer += chunk[0..<n]
        }
        return true
    }
}
