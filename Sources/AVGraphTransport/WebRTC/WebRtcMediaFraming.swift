import Foundation

/// How a WebRTC publisher's media travels from the WHIP listener to the source's reader (and
/// through `avgraph serve`'s relay to a run): the depacketized units, already on one timeline,
/// as records of a kind byte, a big-endian UInt32 length and that many bytes. `H` (first, once)
/// the streams; `P` a unit: its stream, flags (1: a keyframe), its time in the stream's clock
/// units (Int64) and its bytes. No container: nothing to probe, no buffering, every codec WHIP
/// brings; the relay format is `webrtc`.
package enum WebRtcMediaFraming {
    package static let format = "webrtc"
    package static let header = UInt8(ascii: "H"), packet = UInt8(ascii: "P")
    /// The largest record a reader takes (a unit is bounded by the depacketizers' 8 MiB).
    package static let maxRecord = 9 << 20

    package struct Stream: Codable, Equatable, Sendable {
        /// `video` or `audio`.
        package var kind: String
        /// The SDP name, lowercased: h264, vp8, opus.
        package var codec: String
        package var clockRate: Int
        package var channels: Int
        package var width: Int
        package var height: Int
        /// H.264: its SPS and PPS in Annex B (what the first keyframe brought).
        package var extradata: [UInt8]
        package init(kind: String, codec: String, clockRate: Int, channels: Int = 0, width: Int = 0, height: Int = 0, extradata: [UInt8] = []) {
            (self.kind, self.codec, self.clockRate, self.channels) = (kind, codec, clockRate, channels)
            (self.width, self.height, self.extradata) = (width, height, extradata)
        }
    }

    /// The header: the streams, and when (monotonic seconds, the system's clock: a run that
    /// `serve` relays to reads the same) the media at time 0 arrived.
    package struct Header: Codable, Sendable {
        package var streams: [Stream]
        package var started: Double?
        package init(streams: [Stream], started: Double?) {
            self.streams = streams
            self.started = started
        }
    }

    package static func encodeHeader(_ streams: [Stream], started: Double? = nil) -> [UInt8] {
        record(header, Array((try? JSONEncoder().encode(Header(streams: streams, started: started))) ?? Data()))
    }

    package static func encodePacket(stream: Int, key: Bool, time: Int64, bytes: [UInt8]) -> [UInt8] {
        var body: [UInt8] = [UInt8(stream), key ? 1 : 0]
        body.reserveCapacity(10 + bytes.count)
        for shift in stride(from: 56, through: 0, by: -8) { body.append(UInt8(truncatingIfNeeded: time >> Int64(shift))) }
        body += bytes
        return record(packet, body)
    }

    private static func record(_ kind: UInt8, _ body: [UInt8]) -> [UInt8] {
        let n = body.count
        return [kind, UInt8(n >> 24 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + body
    }
}
