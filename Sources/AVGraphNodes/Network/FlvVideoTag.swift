import Foundation

/// The video codecs avgraph's RTMP server takes: legacy FLV's AVC (codec id 7) and HEVC (12, as
/// Chinese CDNs and some phone apps send it), and Enhanced RTMP's FourCC codecs.
public enum FlvVideoCodec: String, CaseIterable, Sendable {
    case h264 = "avc1", hevc = "hvc1", av1 = "av01", vp9 = "vp09"

    /// Codecs whose coded frames carry a composition time and length-prefixed NAL units.
    var isNalBased: Bool { self == .h264 || self == .hevc }

    init?(fourCC: UInt32) { self.init(rawValue: FlvExTracks.name(fourCC)) }
}

struct FlvTagError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// What an audio or video packet of a message is.
enum FlvPacketKind: Equatable {
    /// A configuration record (avcC, hvcC, av1C, vpcC; AudioSpecificConfig...): a new sequence, maybe a new size.
    case sequenceStart
    /// Coded pictures (length-prefixed NAL units for AVC and HEVC; OBUs of one temporal unit for
    /// AV1; VP9 frames) or coded audio.
    case codedFrames
}

/// What one video message (an FLV tag's body, an RTMP video message) says for the track avgraph takes.
struct FlvVideoPacket {
    var codec: FlvVideoCodec
    var kind: FlvPacketKind
    var key: Bool
    /// Milliseconds from decoding to presentation (AVC, HEVC).
    var compositionTime: Int32
    var body: ArraySlice<UInt8>
}

/// Reads video messages, legacy and Enhanced RTMP (the Veovera specification, v1 and v2:
/// ExVideoTagHeader, its packet types, ModEx, multitrack). Of a multitrack stream it keeps the
/// first track it sees (`tracks.otherTracksIgnored` turns true once another was skipped).
struct FlvVideoReader {
    private(set) var tracks = FlvExTracks(multitrackType: 6)

    private enum PacketType: UInt8 {
        case sequenceStart = 0, codedFrames = 1, sequenceEnd = 2, codedFramesX = 3, metadata = 4
        case mpeg2TSSequenceStart = 5, multitrack = 6, modEx = 7
    }

    /// The packets of the kept track in one message (none for an end of sequence, metadata, a
    /// command frame); throws on what is not a video message avgraph can decode.
    mutating func read(_ p: ArraySlice<UInt8>) throws(FlvTagError) -> [FlvVideoPacket] {
        guard let first = p.first else { return [] }
        let frameType = first >> 4 & 7
        let key = frameType == 1 || frameType == 4
        if first & 0x80 == 0 {
            let id = first & 0x0F
            let codec: FlvVideoCodec
            switch id {
            case 7: codec = .h264
            case 12: codec = .hevc
            default: throw FlvTagError("its video codec (FLV codec id \(id)) is not one avgraph decodes (H.264, HEVC, AV1, VP9)")
            }
            // A command frame (seek start/end) carries no picture.
            guard frameType != 5, p.count >= 5 else { return [] }
            let i = p.startIndex
            let kind: FlvPacketKind
            switch p[i + 1] {
            case 0: kind = .sequenceStart
            case 1: kind = .codedFrames
            default: return []
            }
            return [FlvVideoPacket(codec: codec, kind: kind, key: key, compositionTime: Self.si24(p, i + 2), body: p[(i + 5)...])]
        }
        var bytes = ByteReader(p.dropFirst())
        let packetType = try FlvExTracks.skipModEx(&bytes, packetType: first & 0x0F)
        if frameType == 5 && packetType != PacketType.metadata.rawValue { return [] }
        let (type, kept) = try tracks.read(&bytes, packetType: packetType)
        guard let type = PacketType(rawValue: type), type != .multitrack, type != .modEx else {
            throw FlvTagError("it sent a video packet of unknown type \(type)")
        }
        var out: [FlvVideoPacket] = []
        for (fourCC, body) in kept {
            guard let codec = FlvVideoCodec(fourCC: fourCC) else {
                let known = FlvVideoCodec.allCases.map(\.rawValue).joined(separator: ", ")
                throw FlvTagError("its video codec ('\(FlvExTracks.name(fourCC))') is not one avgraph decodes (\(known))")
            }
            switch type {
            case .sequenceStart:
                out.append(FlvVideoPacket(codec: codec, kind: .sequenceStart, key: true, compositionTime: 0, body: body))
            case .codedFrames where codec.isNalBased:
                guard body.count >= 3 else { throw FlvTagError("it sent a video packet cut short") }
                out.append(FlvVideoPacket(codec: codec, kind: .codedFrames, key: key, compositionTime: Self.si24(body, body.startIndex),
                                          body: body.dropFirst(3)))
            case .codedFrames, .codedFramesX:
                out.append(FlvVideoPacket(codec: codec, kind: .codedFrames, key: key, compositionTime: 0, body: body))
            default:
                // End of sequence, HDR metadata, an AV1 MPEG-2 TS descriptor: nothing to decode.
                break
            }
        }
        return out
    }

    private static func si24(_ p: ArraySlice<UInt8>, _ i: Int) -> Int32 {
        let v = Int32(p[i]) << 16 | Int32(p[i + 1]) << 8 | Int32(p[i + 2])
        return v & 0x80_0000 != 0 ? v - 0x100_0000 : v
    }
}

/// Enhanced RTMP's framing shared by audio and video messages after their first byte: ModEx
/// modifiers, then one FourCC track or several (multitrack), of which the first seen is kept.
struct FlvExTracks {
    /// The packet type that announces multitrack: 6 for video, 5 for audio.
    let multitrackType: UInt8
    private(set) var track: UInt8?
    private(set) var otherTracksIgnored = false

    init(multitrackType: UInt8) { self.multitrackType = multitrackType }

    /// Skips ModEx modifiers (today a nanosecond timestamp offset, below RTMP's milliseconds):
    /// the packet type they end with.
    static func skipModEx(_ bytes: inout ByteReader, packetType: UInt8) throws(FlvTagError) -> UInt8 {
        var type = packetType
        while type == 7 {
            var size = Int(try bytes.uint(1)) + 1
            if size == 256 { size = Int(try bytes.uint(2)) + 1 }
            _ = try bytes.take(size)
            type = UInt8(try bytes.uint(1)) & 0x0F
        }
        return type
    }

    /// The packet type of the tracks and, of the kept track, its FourCC and body.
    mutating func read(_ bytes: inout ByteReader, packetType: UInt8) throws(FlvTagError) -> (UInt8, [(UInt32, ArraySlice<UInt8>)]) {
        guard packetType == multitrackType else { return (packetType, [(try bytes.uint(4), bytes.rest())]) }
        let b = UInt8(try bytes.uint(1))
        let layout = b >> 4, type = b & 0x0F
        // 0: one track, 1: many of one codec, 2: many of many codecs (a FourCC each).
        var fourCC: UInt32 = try layout == 2 ? 0 : bytes.uint(4)
        var kept: [(UInt32, ArraySlice<UInt8>)] = []
        repeat {
            if layout == 2 { fourCC = try bytes.uint(4) }
            let id = UInt8(try bytes.uint(1))
            let body = try layout == 0 ? bytes.rest() : bytes.take(Int(bytes.uint(3)))
            if track == nil { track = id }
            if id == track { kept.append((fourCC, body)) } else { otherTracksIgnored = true }
        } while layout != 0 && !bytes.isAtEnd
        return (type, kept)
    }

    static func name(_ fourCC: UInt32) -> String {
        String(bytes: (0..<4).map { UInt8(fourCC >> (24 - 8 * $0) & 0xFF) }, encoding: .isoLatin1) ?? "?"
    }
}

/// Big-endian fields of a message, each read checked against its end.
struct ByteReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var isAtEnd: Bool { bytes.isEmpty }

    mutating func take(_ n: Int) throws(FlvTagError) -> ArraySlice<UInt8> {
        guard n >= 0, n <= bytes.count else { throw FlvTagError("it sent a message cut short") }
        defer { bytes = bytes.dropFirst(n) }
        return bytes.prefix(n)
    }

    mutating func uint(_ n: Int) throws(FlvTagError) -> UInt32 {
        try take(n).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    mutating func rest() -> ArraySlice<UInt8> {
        defer { bytes = bytes.suffix(0) }
        return bytes
    }
}
