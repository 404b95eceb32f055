import AVGraph
import CFFmpeg
import Foundation

/// A network source's packets from a WebRTC publisher (`WebRtcMediaFraming`): the streams of
/// its header as codec parameters, each record a packet. H.264 comes as Annex B with its SPS
/// and PPS as extradata: the network reader repacks it as an RTMP phone's (`passthrough: auto`).
package final class WebRtcMediaReader: PacketSource {
    private let name: String
    private let readBytes: (UnsafeMutableRawBufferPointer) -> Int
    private var streams: [(description: WebRtcMediaFraming.Stream, parameters: CodecParameters)] = []
    private var buffer: [UInt8] = []
    private var position = 0
    /// What one read takes, reused: no allocation per record.
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    package private(set) var startedAt: Double?

    /// Reads the header; throws when the bytes are not this framing or name a codec avgraph lacks.
    package init(name: String, read: @escaping (UnsafeMutableRawBufferPointer) -> Int) throws {
        self.name = name
        readBytes = read
        guard let (kind, body) = try nextRecord() else { throw MediaError("\(name): ended before its streams were known") }
        guard kind == WebRtcMediaFraming.header, let header = try? JSONDecoder().decode(WebRtcMediaFraming.Header.self, from: Data(body)),
              !header.streams.isEmpty, header.streams.count < 8 else {
            throw MediaError("\(name): not WebRTC media as avgraph relays it (no header)")
        }
        let described = header.streams
        startedAt = header.started
        for s in described {
            let parameters: CodecParameters
            switch (s.kind, s.codec) {
            case ("video", "h264"): parameters = try CodecParameters(video: AV_CODEC_ID_H264, width: s.width, height: s.height, extradata: s.extradata)
            // Annex B with its VPS, SPS and PPS as extradata: decodes; no hvcC, so no passthrough.
            case ("video", "h265"): parameters = try CodecParameters(video: AV_CODEC_ID_HEVC, width: s.width, height: s.height, extradata: s.extradata)
            case ("video", "vp8"): parameters = try CodecParameters(video: AV_CODEC_ID_VP8, width: s.width, height: s.height, extradata: [])
            case ("video", "vp9"): parameters = try CodecParameters(video: AV_CODEC_ID_VP9, width: s.width, height: s.height, extradata: [])
            // The sequence header comes in band with every keyframe: libdav1d needs no av1C.
            case ("video", "av1"): parameters = try CodecParameters(video: AV_CODEC_ID_AV1, width: s.width, height: s.height, extradata: [])
            case ("audio", "opus"): parameters = try CodecParameters(audio: AV_CODEC_ID_OPUS, sampleRate: 48000, channels: max(1, min(2, s.channels)),
                                                                  extradata: Self.opusHead(channels: max(1, min(2, s.channels))))
            default: throw MediaError("\(name): no decoder for its \(s.kind) codec '\(s.codec)'")
            }
            streams.append((s, parameters))
        }
    }

    /// RFC 7845's identification header: what libavcodec's Opus decoder is opened with.
    static func opusHead(channels: Int) -> [UInt8] {
        Array("OpusHead".utf8) + [1, UInt8(channels), 0x38, 0x01, 0x80, 0xBB, 0, 0, 0, 0, 0]
    }

    package func bestStream(_ type: AVMediaType) -> Int? {
        let kind = type == AVMEDIA_TYPE_VIDEO ? "video" : type == AVMEDIA_TYPE_AUDIO ? "audio" : ""
        return streams.firstIndex { $0.description.kind == kind }
    }

    package func parameters(_ stream: Int) -> UnsafePointer<AVCodecParameters> { UnsafePointer(streams[stream].parameters.pointer) }
    package func timeBase(_ stream: Int) -> Rational { Rational(1, max(1, streams[stream].description.clockRate)) }
    package func orientation(_ stream: Int) -> Orientation { .up }

    package func read(into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        while let (kind, body) = try nextRecord() {
            guard kind == WebRtcMediaFraming.packet, body.count >= 10, Int(body[body.startIndex]) < streams.count else { continue }
            var time: Int64 = 0
            for b in body[(body.startIndex + 2)..<(body.startIndex + 10)] { time = time << 8 | Int64(b) }
            try BuiltPacket.fill(packet, bytes: body[(body.startIndex + 10)...], stream: Int(body[body.startIndex]), pts: time, dts: time,
                                 key: body[body.startIndex + 1] & 1 != 0)
            return true
        }
        return false
    }

    private func nextRecord() throws -> (UInt8, ArraySlice<UInt8>)? {
        guard try fill(5) else { return nil }
        let kind = buffer[position]
        let length = Int(buffer[position + 1]) << 24 | Int(buffer[position + 2]) << 16 | Int(buffer[position + 3]) << 8 | Int(buffer[position + 4])
        guard length <= WebRtcMediaFraming.maxRecord else { throw MediaError("\(name): a record of \(length) bytes (broken framing)") }
        guard try fill(5 + length) else { return nil }
        let body = buffer[(position + 5)..<(position + 5 + length)]
        position += 5 + length
        return (kind, body)
    }

    /// Whether `count` bytes from `position` are buffered (reading more as needed); false at the end.
    private func fill(_ count: Int) throws -> Bool {
        if position > 0 && position + count > buffer.count {
            buffer.removeFirst(position)
            position = 0
        }
        while buffer.count - position < count {
            let n = chunk.withUnsafeMutableBytes { readBytes($0) }
            if n <= 0 { return false }
            buffer += chunk[..<n]
        }
        return true
    }
}
