import CFFmpeg
import Foundation

/// What one audio message says for the track avgraph takes.
package struct FlvAudioPacket {
    package var codec: AVCodecID
    package var kind: FlvPacketKind
    /// Sample rate and channels as the legacy header's flags say (0: the codec's own headers tell).
    package var sampleRate: Int, channels: Int
    package var body: ArraySlice<UInt8>
}

package enum FlvAudio {
    /// Enhanced RTMP's audio FourCCs avgraph decodes.
    package static let enhancedFourCCs = ["mp4a", ".mp3", "Opus", "fLaC", "ac-3", "ec-3"]
    package static let enhancedCodecs: [String: AVCodecID] = [
        "mp4a": AV_CODEC_ID_AAC, ".mp3": AV_CODEC_ID_MP3, "Opus": AV_CODEC_ID_OPUS, "fLaC": AV_CODEC_ID_FLAC,
        "ac-3": AV_CODEC_ID_AC3, "ec-3": AV_CODEC_ID_EAC3,
    ]

    /// Sample rate and channels an AAC AudioSpecificConfig declares.
    package static func aacConfig(_ c: ArraySlice<UInt8>) -> (rate: Int, channels: Int)? {
        var bits = H264PictureSize.BitReader(plain: c.prefix(8))
        guard var object = bits.read(5) else { return nil }
        if object == 31 { object = 32 + (bits.read(6) ?? 0) }
        guard let index = bits.read(4) else { return nil }
        let rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]
        let rate = index == 15 ? Int(bits.read(24) ?? 0) : Int(index) < rates.count ? rates[Int(index)] : 0
        guard let channels = bits.read(4), rate > 0 else { return nil }
        return (rate, Int(channels))
    }
}

/// Reads audio messages: legacy FLV (AAC, MP3, PCM, G.711, Nellymoser, Speex, ADPCM) and
/// Enhanced RTMP's ExAudioTagHeader (FourCC codecs, ModEx, multitrack: the first track kept).
package struct FlvAudioReader {
    package private(set) var tracks = FlvExTracks(multitrackType: 5)

    package mutating func read(_ p: ArraySlice<UInt8>) throws(FlvTagError) -> [FlvAudioPacket] {
        guard let first = p.first else { return [] }
        let format = first >> 4
        guard format == 9 else {
            let rate = [5512, 11025, 22050, 44100][Int(first >> 2 & 3)]
            let channels = Int(first & 1) + 1
            let body = p.dropFirst()
            func packet(_ codec: AVCodecID, _ rate: Int, _ channels: Int) -> [FlvAudioPacket] {
                [FlvAudioPacket(codec: codec, kind: .codedFrames, sampleRate: rate, channels: channels, body: body)]
            }
            switch format {
            case 10:
                guard let kind = body.first else { return [] }
                return [FlvAudioPacket(codec: AV_CODEC_ID_AAC, kind: kind == 0 ? .sequenceStart : .codedFrames,
                                       sampleRate: 0, channels: 0, body: body.dropFirst())]
            case 0, 3: return packet(first >> 1 & 1 == 1 ? AV_CODEC_ID_PCM_S16LE : AV_CODEC_ID_PCM_U8, rate, channels)
            case 1: return packet(AV_CODEC_ID_ADPCM_SWF, rate, channels)
            case 2: return packet(AV_CODEC_ID_MP3, 0, 0)
            case 14: return packet(AV_CODEC_ID_MP3, 8000, 0)
            case 4: return packet(AV_CODEC_ID_NELLYMOSER, 16000, 1)
            case 5: return packet(AV_CODEC_ID_NELLYMOSER, 8000, 1)
            case 6: return packet(AV_CODEC_ID_NELLYMOSER, rate, channels)
            case 7: return packet(AV_CODEC_ID_PCM_ALAW, 8000, channels)
            case 8: return packet(AV_CODEC_ID_PCM_MULAW, 8000, channels)
            case 11: return packet(AV_CODEC_ID_SPEEX, 16000, 1)
            default: throw FlvTagError("its audio codec (FLV sound format \(format)) is not one avgraph decodes")
            }
        }
        var bytes = ByteReader(p.dropFirst())
        let packetType = try FlvExTracks.skipModEx(&bytes, packetType: first & 0x0F)
        let (type, kept) = try tracks.read(&bytes, packetType: packetType)
        var out: [FlvAudioPacket] = []
        for (fourCC, body) in kept {
            guard let codec = FlvAudio.enhancedCodecs[FlvExTracks.name(fourCC)] else {
                throw FlvTagError("its audio codec ('\(FlvExTracks.name(fourCC))') is not one avgraph decodes (\(FlvAudio.enhancedFourCCs.joined(separator: ", ")))")
            }
            // 0: sequence start, 1: coded frames; an end of sequence, a multichannel config: nothing to decode.
            guard type <= 1 else { continue }
            out.append(FlvAudioPacket(codec: codec, kind: type == 0 ? .sequenceStart : .codedFrames, sampleRate: 0, channels: 0, body: body))
        }
        return out
    }
}
