import Foundation

/// A client's outgoing chunk stream: messages cut into chunks of `chunkSize`, each chunk stream
/// remembering its last header so the next message sends only what changed (format 1: the
/// timestamp delta, length and type; format 2: the delta alone) and its continuation chunks
/// none (format 3). Timestamps or deltas of 0xFFFFFF and over go in the extended timestamp
/// field, which every chunk of that message repeats (as RtmpChunkReader and FFmpeg read it).
///
/// The server's `RtmpChunkWriter` writes every message with a full header: it sends a few
/// commands. A publisher sends tens of messages a second, where 7 bytes a message saved add up.
package final class RtmpChunkStreamWriter {
    private struct Last {
        var timestamp: UInt32
        var delta: UInt32
        var length: Int
        var type: UInt8
        var streamID: UInt32
    }

    /// The size announced to the peer (Set Chunk Size) before it is used.
    package var chunkSize = 128
    private var last: [UInt32: Last] = [:]

    package init() {}

    /// The chunks of `m` on chunk stream `csid` (2 to 65599).
    package func chunks(_ m: RtmpMessage, csid: UInt32) -> [UInt8] {
        let n = m.payload.count
        var format: UInt8 = 0
        var field = m.timestamp
        var delta: UInt32 = 0
        if let previous = last[csid], previous.streamID == m.streamID, m.timestamp >= previous.timestamp {
            delta = m.timestamp - previous.timestamp
            field = delta
            format = previous.length == n && previous.type == m.type ? 2 : 1
        }
        last[csid] = Last(timestamp: m.timestamp, delta: delta, length: n, type: m.type, streamID: m.streamID)
        let extended = field >= 0xFFFFFF
        var out: [UInt8] = []
        out.reserveCapacity(n + 18 + n / max(chunkSize, 1) * 5)
        Self.basicHeader(format, csid, into: &out)
        let t = extended ? 0xFFFFFF : field
        out += [UInt8(t >> 16 & 0xFF), UInt8(t >> 8 & 0xFF), UInt8(t & 0xFF)]
        if format <= 1 { out += [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), m.type] }
        if format == 0 {
            // The message stream id is the one little-endian field of RTMP.
            out += [UInt8(m.streamID & 0xFF), UInt8(m.streamID >> 8 & 0xFF), UInt8(m.streamID >> 16 & 0xFF), UInt8(m.streamID >> 24)]
        }
        if extended { out += RtmpChunkWriter.uint32(field) }
        var offset = 0
        repeat {
            if offset > 0 {
                Self.basicHeader(3, csid, into: &out)
                if extended { out += RtmpChunkWriter.uint32(field) }
            }
            let piece = min(chunkSize, n - offset)
            out += m.payload[offset..<offset + piece]
            offset += piece
        } while offset < n
        return out
    }

    /// Format and chunk stream id in one, two or three bytes.
    private static func basicHeader(_ format: UInt8, _ csid: UInt32, into out: inout [UInt8]) {
        switch csid {
        case 2...63: out.append(format << 6 | UInt8(csid))
        case 64...319: out += [format << 6, UInt8(csid - 64)]
        default:
            let v = csid - 64
            out += [format << 6 | 1, UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)]
        }
    }
}
