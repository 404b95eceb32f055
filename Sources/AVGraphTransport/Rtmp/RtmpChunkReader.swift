import Foundation

/// One RTMP message, reassembled from its chunks.
package struct RtmpMessage: Sendable {
    package var type: UInt8
    package var streamID: UInt32
    /// Milliseconds, absolute (deltas already added up), as RTMP's 32 bits.
    package var timestamp: UInt32
    package var payload: [UInt8]

    package init(type: UInt8, streamID: UInt32, timestamp: UInt32, payload: [UInt8]) {
        (self.type, self.streamID, self.timestamp, self.payload) = (type, streamID, timestamp, payload)
    }
}

package struct RtmpProtocolError: Error, CustomStringConvertible {
    package var description: String
    package init(_ d: String) { description = d }
}

/// The chunk stream a peer sends after the handshake, parsed incrementally: bytes in as they
/// arrive, whole messages out. Every size it holds is bounded (message length, open chunk
/// streams, bytes buffered), so a peer can make it hold little more than `maxMessageSize`.
package final class RtmpChunkReader {
    package enum MessageType {
        package static let setChunkSize: UInt8 = 1, abort: UInt8 = 2, acknowledgement: UInt8 = 3, userControl: UInt8 = 4
        package static let windowAckSize: UInt8 = 5, setPeerBandwidth: UInt8 = 6, audio: UInt8 = 8, video: UInt8 = 9
        package static let amf3Data: UInt8 = 15, amf3Command: UInt8 = 17, amf0Data: UInt8 = 18, amf0Command: UInt8 = 20
    }

    private struct ChunkStream {
        var timestamp: UInt32 = 0
        var delta: UInt32 = 0
        var length = 0
        var type: UInt8 = 0
        var streamID: UInt32 = 0
        var extended = false
        var partial: [UInt8]?
    }

    /// The peer's chunk size (Set Chunk Size changes it; 128 until then).
    package private(set) var chunkSize = 128
    /// The longest message accepted: small until a publisher is admitted (commands only).
    package var maxMessageSize: Int
    package static let maxChunkStreams = 32
    private var streams: [UInt32: ChunkStream] = [:]
    /// Bytes of messages begun and not complete, over every chunk stream: at most twice the
    /// longest message, however many chunk streams a peer opens.
    private var partialBytes = 0
    private var buffer: [UInt8] = []
    private var position = 0
    /// Bytes read so far (for Acknowledgement).
    package private(set) var received: UInt64 = 0

    package init(maxMessageSize: Int) { self.maxMessageSize = maxMessageSize }

    /// Parses what `bytes` completes; throws on anything that is not RTMP's chunk stream.
    package func feed(_ bytes: UnsafeRawBufferPointer) throws(RtmpProtocolError) -> [RtmpMessage] {
        received += UInt64(bytes.count)
        buffer.append(contentsOf: bytes)
        var messages: [RtmpMessage] = []
        while let message = try nextChunk() {
            if let message { messages.append(message) }
        }
        if position > 0 {
            buffer.removeFirst(position)
            position = 0
        }
        return messages
    }

    /// One chunk from the buffer: nil when it is not all there yet; .some(nil) when a chunk was
    /// read but its message is not complete.
    private func nextChunk() throws(RtmpProtocolError) -> RtmpMessage?? {
        var p = position
        let end = buffer.count
        func byte() -> UInt32? {
            guard p < end else { return nil }
            defer { p += 1 }
            return UInt32(buffer[p])
        }
        func big(_ n: Int) -> UInt32? {
            guard end - p >= n else { return nil }
            var v: UInt32 = 0
            for i in 0..<n { v = v << 8 | UInt32(buffer[p + i]) }
            p += n
            return v
        }
        guard let first = byte() else { return nil }
        let format = first >> 6
        var csid = first & 0x3F
        if csid == 0 {
            guard let b = byte() else { return nil }
            csid = 64 + b
        } else if csid == 1 {
            guard let b = byte(), let c = byte() else { return nil }
            csid = 64 + b + c * 256
        }
        var stream = streams[csid] ?? ChunkStream()
        if streams[csid] == nil {
            guard format == 0 else { throw RtmpProtocolError("chunk stream \(csid) starts without a full header") }
            guard streams.count < Self.maxChunkStreams else { throw RtmpProtocolError("more than \(Self.maxChunkStreams) chunk streams") }
        }
        let starting = stream.partial == nil
        if !starting && format != 3 { throw RtmpProtocolError("a new header in the middle of a message on chunk stream \(csid)") }
        var stamp: UInt32 = 0
        if format <= 2 {
            guard let t = big(3) else { return nil }
            stamp = t
            if format <= 1 {
                guard let length = big(3), let type = byte() else { return nil }
                stream.length = Int(length)
                stream.type = UInt8(type)
                if format == 0 {
                    guard end - p >= 4 else { return nil }
                    stream.streamID = UInt32(buffer[p]) | UInt32(buffer[p + 1]) << 8 | UInt32(buffer[p + 2]) << 16 | UInt32(buffer[p + 3]) << 24
                    p += 4
                }
            }
            stream.extended = stamp == 0xFFFFFF
        }
        if stream.extended {
            guard let t = big(4) else { return nil }
            if format <= 2 { stamp = t }
        }
        if starting {
            switch format {
            case 0: stream.timestamp = stamp; stream.delta = 0
            case 1, 2: stream.delta = stamp; stream.timestamp &+= stamp
            default: stream.timestamp &+= stream.delta
            }
            guard stream.length <= maxMessageSize else {
                throw RtmpProtocolError("a message of \(stream.length) bytes (at most \(maxMessageSize) here)")
            }
            // Grown as bytes arrive: a declared length costs nothing until it is sent.
            stream.partial = []
        }
        let have = stream.partial!.count
        let piece = min(chunkSize, stream.length - have)
        guard end - p >= piece else { return nil }
        partialBytes += piece
        guard partialBytes <= 2 * maxMessageSize else { throw RtmpProtocolError("more than \(2 * maxMessageSize) bytes of unfinished messages") }
        stream.partial!.append(contentsOf: buffer[p..<p + piece])
        p += piece
        position = p
        var message: RtmpMessage?
        if stream.partial!.count >= stream.length {
            message = RtmpMessage(type: stream.type, streamID: stream.streamID, timestamp: stream.timestamp, payload: stream.partial!)
            partialBytes -= stream.partial!.count
            stream.partial = nil
        }
        streams[csid] = stream
        if let m = message { try control(m) }
        return .some(message)
    }

    /// The protocol messages that change how the rest is parsed.
    private func control(_ m: RtmpMessage) throws(RtmpProtocolError) {
        switch m.type {
        case MessageType.setChunkSize:
            guard m.payload.count >= 4 else { throw RtmpProtocolError("short Set Chunk Size") }
            let size = Int(m.payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF)
            guard (1...0xFF_FFFF).contains(size) else { throw RtmpProtocolError("chunk size \(size)") }
            chunkSize = size
        case MessageType.abort:
            guard m.payload.count >= 4 else { return }
            let csid = m.payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            partialBytes -= streams[csid]?.partial?.count ?? 0
            streams[csid]?.partial = nil
        default: break
        }
    }
}

/// Messages the server sends, cut into chunks of `chunkSize`.
package enum RtmpChunkWriter {
    package static func chunks(_ m: RtmpMessage, csid: UInt8, chunkSize: Int = 128) -> [UInt8] {
        var out: [UInt8] = [csid & 0x3F]  // format 0
        let t = min(m.timestamp, 0xFFFFFF)
        let n = m.payload.count
        out += [UInt8(t >> 16 & 0xFF), UInt8(t >> 8 & 0xFF), UInt8(t & 0xFF)]
        out += [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), m.type]
        out += [UInt8(m.streamID & 0xFF), UInt8(m.streamID >> 8 & 0xFF), UInt8(m.streamID >> 16 & 0xFF), UInt8(m.streamID >> 24)]
        var offset = 0
        repeat {
            if offset > 0 { out.append(0xC0 | (csid & 0x3F)) }
            let piece = min(chunkSize, n - offset)
            out += m.payload[offset..<offset + piece]
            offset += piece
        } while offset < n
        return out
    }

    package static func uint32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
}
