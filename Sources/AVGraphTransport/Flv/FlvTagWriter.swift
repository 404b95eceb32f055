import Foundation

/// The bodies of FLV audio and video tags (what RTMP's audio and video messages carry), from
/// encoded pictures and audio frames: the writer's side of `FlvVideoReader`/`FlvAudioReader`.
/// H.264 as legacy FLV (codec id 7), HEVC as Enhanced RTMP (FourCC `hvc1`: legacy FLV has no
/// id for it that FFmpeg or the E-RTMP servers read), AAC as legacy FLV (sound format 10).
package enum FlvTagWriter {
    /// Legacy frame types (upper nibble of the first byte): a keyframe or any other picture.
    private static func frameType(key: Bool) -> UInt8 { key ? 1 : 2 }

    /// Enhanced RTMP video packet types (v1).
    private enum ExPacketType {
        static let sequenceStart: UInt8 = 0, codedFrames: UInt8 = 1, codedFramesX: UInt8 = 3
    }

    /// The video sequence header: `record` is the decoder configuration (avcC, hvcC).
    package static func videoSequenceStart(_ codec: FlvVideoCodec, record: [UInt8]) -> [UInt8] {
        switch codec {
        case .h264: return [frameType(key: true) << 4 | 7, 0, 0, 0, 0] + record
        default: return exHeader(codec, key: true, packetType: ExPacketType.sequenceStart) + record
        }
    }

    /// One picture: `units` are its NAL units behind 4-byte lengths, `compositionTime`
    /// milliseconds from decoding to presentation (pts - dts).
    package static func videoFrame(_ codec: FlvVideoCodec, units: [UInt8], key: Bool, compositionTime: Int32) -> [UInt8] {
        let c = UInt32(bitPattern: compositionTime)
        let si24 = [UInt8(c >> 16 & 0xFF), UInt8(c >> 8 & 0xFF), UInt8(c & 0xFF)]
        switch codec {
        case .h264: return [frameType(key: key) << 4 | 7, 1] + si24 + units
        default:
            // CodedFramesX when the composition time is zero: three bytes less per picture.
            if compositionTime == 0 { return exHeader(codec, key: key, packetType: ExPacketType.codedFramesX) + units }
            return exHeader(codec, key: key, packetType: ExPacketType.codedFrames) + si24 + units
        }
    }

    /// Enhanced RTMP's ExVideoTagHeader: the IsExHeader bit, frame type, packet type, FourCC.
    private static func exHeader(_ codec: FlvVideoCodec, key: Bool, packetType: UInt8) -> [UInt8] {
        [0x80 | frameType(key: key) << 4 | packetType] + Array(codec.rawValue.utf8)
    }

    /// AAC's first byte: sound format 10, and the flags FLV fixes for it (44.1 kHz, 16 bits,
    /// stereo: the AudioSpecificConfig says what the stream really is).
    private static let aacFlags: UInt8 = 10 << 4 | 3 << 2 | 1 << 1 | 1

    /// AAC's sequence header: the AudioSpecificConfig (the encoder's extradata).
    package static func aacSequenceStart(config: [UInt8]) -> [UInt8] { [aacFlags, 0] + config }

    /// One raw AAC frame (no ADTS header).
    package static func aacFrame(_ frame: ArraySlice<UInt8>) -> [UInt8] { [aacFlags, 1] + frame }

    /// A raw AAC frame from what an encoder or a source hands on: an ADTS header taken off.
    package static func rawAac(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let i = bytes.startIndex
        guard bytes.count > 7, bytes[i] == 0xFF, bytes[i + 1] & 0xF6 == 0xF0 else { return bytes }
        let header = bytes[i + 1] & 1 == 1 ? 7 : 9
        return bytes.dropFirst(header)
    }

    /// The AudioSpecificConfig an ADTS header describes (a stream without extradata).
    package static func aacConfig(adts bytes: ArraySlice<UInt8>) -> [UInt8]? {
        let i = bytes.startIndex
        guard bytes.count > 7, bytes[i] == 0xFF, bytes[i + 1] & 0xF6 == 0xF0 else { return nil }
        let object = (bytes[i + 2] >> 6) + 1
        let rate = bytes[i + 2] >> 2 & 0x0F
        let channels = (bytes[i + 2] & 1) << 2 | bytes[i + 3] >> 6
        return [object << 3 | rate >> 1, (rate & 1) << 7 | channels << 3]
    }

    /// The stream's description as `@setDataFrame onMetaData` (what FFmpeg's flv muxer sends
    /// first): a server shows it, some want it before the media.
    package static func metadata(video: (codec: FlvVideoCodec, width: Int, height: Int, frameRate: Double)?,
                         audio: (sampleRate: Int, channels: Int)?) -> [UInt8] {
        var pairs = [Amf0Pair(name: "duration", value: .number(0))]
        if let v = video {
            // Enhanced RTMP gives a FourCC codec its FourCC as the number (FFmpeg 8 does so).
            let id = v.codec == .h264 ? 7 : Double(v.codec.rawValue.utf8.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            pairs += [Amf0Pair(name: "width", value: .number(Double(v.width))), Amf0Pair(name: "height", value: .number(Double(v.height))),
                      Amf0Pair(name: "videocodecid", value: .number(id))]
            if v.frameRate > 0 { pairs.append(Amf0Pair(name: "framerate", value: .number(v.frameRate))) }
        }
        if let a = audio {
            pairs += [Amf0Pair(name: "audiocodecid", value: .number(10)), Amf0Pair(name: "audiosamplerate", value: .number(Double(a.sampleRate))),
                      Amf0Pair(name: "audiosamplesize", value: .number(16)), Amf0Pair(name: "stereo", value: .bool(a.channels > 1))]
        }
        pairs.append(Amf0Pair(name: "encoder", value: .string("avgraph")))
        return Amf0.encode([.string("@setDataFrame"), .string("onMetaData"), .object(pairs)])
    }
}
