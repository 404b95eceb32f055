import AVGraph
import Foundation

/// The wire format of the `socket` source (docs/INGEST.md): each message is a 32-byte
/// little-endian header followed by exactly `payloadSize` bytes.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic `AVGI` |
/// | 4 | 1 | version (1; 2 for a privacy message) |
/// | 5 | 1 | type: 1 video, 2 app audio, 3 mic audio, 4 end of broadcast, 5 privacy (version 2) |
/// | 6 | 2 | flags: bit 0 = audio samples are big-endian |
/// | 8 | 8 | timestamp, microseconds on the producer's clock (signed) |
/// | 16 | 4 | payload size in bytes |
/// | 20 | 4 | video: width; audio: sample rate; privacy: 1 on, 0 off |
/// | 24 | 4 | video: height; audio: channels |
/// | 28 | 1 | video: 1 nv12, 2 bgra, 3 yuv420p; audio: 1 s16, 2 f32, 3 s32 |
/// | 29 | 1 | video: orientation, EXIF 1–8; audio: 0 |
/// | 30 | 2 | reserved (send 0) |
///
/// Video payloads are the planes tightly packed (no row padding), in plane order. A privacy
/// message's timestamp is the first picture time it applies to; its payload is the card's name
/// (0 to 64 bytes of `A-Z a-z 0-9 - _`; none: the node's current card). A version 1 producer
/// never sends one and is read as before.
public enum IngestFraming {
    public static let magic: [UInt8] = Array("AVGI".utf8)
    public static let version: UInt8 = 1
    /// The version that brought the privacy message; messages of version 1 are read as well.
    public static let privacyVersion: UInt8 = 2
    public static let maxCardName = 64
    public static let headerSize = 32
    public static let maxDimension = 8192
    public static let maxVideoPayload = 64 << 20
    public static let maxAudioPayload = 1 << 20

    public enum MessageType: UInt8, Sendable {
        case video = 1, app = 2, mic = 3, end = 4, privacy = 5
    }

    public struct Header: Sendable, Equatable {
        public var type: MessageType
        public var bigEndian = false
        /// Microseconds on the producer's clock.
        public var timestamp: Int64 = 0
        public var payloadSize = 0
        /// Video: width; audio: sample rate.
        public var a = 0
        /// Video: height; audio: channels.
        public var b = 0
        public var format: UInt8 = 0
        public var orientation: Orientation = .up

        public init(type: MessageType) { self.type = type }

        public static func video(_ format: PushPixelFormat, width: Int, height: Int, timestamp: Int64, orientation: Orientation) -> Header {
            var h = Header(type: .video)
            h.a = width
            h.b = height
            h.format = format.rawValue
            h.timestamp = timestamp
            h.orientation = orientation
            h.payloadSize = IngestFraming.videoPayloadSize(format, width: width, height: height)
            return h
        }

        public static func audio(_ type: MessageType, format: PushSampleFormat, rate: Int, channels: Int, bigEndian: Bool,
                                 timestamp: Int64, payloadSize: Int) -> Header {
            var h = Header(type: type)
            h.a = rate
            h.b = channels
            h.format = format.rawValue
            h.bigEndian = bigEndian
            h.timestamp = timestamp
            h.payloadSize = payloadSize
            return h
        }

        /// Privacy on or off from `timestamp` (producer microseconds), showing `cardBytes` bytes of card name.
        public static func privacy(on: Bool, timestamp: Int64, cardBytes: Int) -> Header {
            var h = Header(type: .privacy)
            h.a = on ? 1 : 0
            h.timestamp = timestamp
            h.payloadSize = cardBytes
            return h
        }
    }

    /// Why a message was refused; the connection that sent it is closed.
    public enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        case badMagic, badVersion(UInt8), unknownType(UInt8), badFormat(UInt8), badOrientation(UInt8)
        case badSize(String)

        public var description: String {
            switch self {
            case .badMagic: return "bad magic (not an avgraph ingest stream)"
            case .badVersion(let v): return "unsupported version \(v)"
            case .unknownType(let t): return "unknown message type \(t)"
            case .badFormat(let f): return "unknown format \(f)"
            case .badOrientation(let o): return "orientation \(o) is not an EXIF value 1-8"
            case .badSize(let s): return s
            }
        }
    }

    /// EXIF orientation values 1–8 in order.
    static let exif: [Orientation] = [.up, .upMirrored, .down, .downMirrored, .leftMirrored, .right, .rightMirrored, .left]

    public static func exifValue(_ o: Orientation) -> UInt8 { UInt8(exif.firstIndex(of: o)! + 1) }

    public static func videoPayloadSize(_ f: PushPixelFormat, width: Int, height: Int) -> Int {
        switch f {
        case .bgra: return width * height * 4
        case .nv12, .yuv420p: return width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2)
        }
    }

    /// Parses and checks a header: every field in range and the payload size exactly what the
    /// fields imply, so a reader never allocates or waits for more than a sane message.
    public static func parse(_ p: UnsafeRawBufferPointer) throws(Problem) -> Header {
        guard p.count >= headerSize else { throw .badSize("short header") }
        guard p[0] == magic[0], p[1] == magic[1], p[2] == magic[2], p[3] == magic[3] else { throw .badMagic }
        guard p[4] == version || p[4] == privacyVersion else { throw .badVersion(p[4]) }
        guard let type = MessageType(rawValue: p[5]), type != .privacy || p[4] >= privacyVersion else { throw .unknownType(p[5]) }
        func u32(_ o: Int) -> Int { Int(UInt32(p[o]) | UInt32(p[o + 1]) << 8 | UInt32(p[o + 2]) << 16 | UInt32(p[o + 3]) << 24) }
        var h = Header(type: type)
        h.bigEndian = p[6] & 1 != 0
        var ts: UInt64 = 0
        for i in 0..<8 { ts |= UInt64(p[8 + i]) << (8 * UInt64(i)) }
        h.timestamp = Int64(bitPattern: ts)
        h.payloadSize = u32(16)
        h.a = u32(20)
        h.b = u32(24)
        h.format = p[28]
        switch type {
        case .end:
            guard h.payloadSize == 0 else { throw .badSize("end message with a payload of \(h.payloadSize) bytes") }
        case .privacy:
            guard h.a <= 1 else { throw .badSize("privacy state \(h.a) is neither 0 (off) nor 1 (on)") }
            guard h.payloadSize <= maxCardName else { throw .badSize("card name of \(h.payloadSize) bytes (at most \(maxCardName))") }
        case .video:
            guard let f = PushPixelFormat(rawValue: h.format) else { throw .badFormat(h.format) }
            guard (1...8).contains(p[29]) else { throw .badOrientation(p[29]) }
            h.orientation = exif[Int(p[29]) - 1]
            guard (2...maxDimension).contains(h.a), (2...maxDimension).contains(h.b) else {
                throw .badSize("picture size \(h.a)x\(h.b) outside 2..\(maxDimension)")
            }
            if f != .bgra && (h.a % 2 != 0 || h.b % 2 != 0) { throw .badSize("\(f) picture size \(h.a)x\(h.b) is odd") }
            let expected = videoPayloadSize(f, width: h.a, height: h.b)
            guard h.payloadSize == expected, expected <= maxVideoPayload else {
                throw .badSize("video payload of \(h.payloadSize) bytes, \(h.a)x\(h.b) \(f) needs \(expected)")
            }
        case .app, .mic:
            guard let f = PushSampleFormat(rawValue: h.format) else { throw .badFormat(h.format) }
            guard (8000...384_000).contains(h.a) else { throw .badSize("sample rate \(h.a) outside 8000..384000") }
            guard (1...8).contains(h.b) else { throw .badSize("\(h.b) channels outside 1..8") }
            let frameBytes = h.b * f.bytesPerSample
            guard h.payloadSize > 0, h.payloadSize <= maxAudioPayload, h.payloadSize % frameBytes == 0 else {
                throw .badSize("audio payload of \(h.payloadSize) bytes (whole frames of \(frameBytes) bytes, at most \(maxAudioPayload))")
            }
        }
        return h
    }

    /// The 32 header bytes of `h`.
    public static func encode(_ h: Header) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: headerSize)
        out[0..<4] = magic[0..<4]
        out[4] = h.type == .privacy ? privacyVersion : version
        out[5] = h.type.rawValue
        out[6] = h.bigEndian ? 1 : 0
        let ts = UInt64(bitPattern: h.timestamp)
        for i in 0..<8 { out[8 + i] = UInt8(truncatingIfNeeded: ts >> (8 * UInt64(i))) }
        func put(_ v: Int, _ o: Int) { for i in 0..<4 { out[o + i] = UInt8(truncatingIfNeeded: UInt32(truncatingIfNeeded: v) >> (8 * UInt32(i))) } }
        put(h.payloadSize, 16)
        put(h.a, 20)
        put(h.b, 24)
        out[28] = h.format
        out[29] = h.type == .video ? exifValue(h.orientation) : 0
        return out
    }
}
