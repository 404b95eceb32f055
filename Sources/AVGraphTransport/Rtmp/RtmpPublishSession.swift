import Foundation

/// The client side of one RTMP publish, without the socket (the server side is
/// `RtmpConnection`): bytes from the server in, bytes to send out. The simple handshake
/// (C0/C1, then C2 echoing S1), `connect` (announcing Enhanced RTMP's `fourCcList`), Set Chunk
/// Size, releaseStream/FCPublish/createStream/publish up to `NetStream.Publish.Start`, then
/// media messages; acknowledgements for the server's window and answers to its pings.
package final class RtmpPublishSession {
    package enum Phase: Equatable, Sendable { case handshake, commands, publishing, ended }

    package struct Refused: Error, CustomStringConvertible {
        package var description: String
    }

    /// Chunk streams: protocol control (2, the specification's), NetConnection commands (3),
    /// NetStream commands and data (5), audio (4), video (6): what FFmpeg uses.
    package enum Csid {
        package static let control: UInt32 = 2, command: UInt32 = 3, audio: UInt32 = 4, data: UInt32 = 5, video: UInt32 = 6
        package static let streamCommand: UInt32 = 5
    }

    /// The codecs this client may send as Enhanced RTMP, as its connect says (FFmpeg 8's order).
    package static let fourCcList = ["hvc1", "av01", "avc1"]
    /// Chunks this size carry a 4 Mbit/s stream's picture in a few chunks (128, RTMP's default, costs a header every 128 bytes).
    package static let chunkSize = 4096

    package let address: RtmpAddress
    package private(set) var phase = Phase.handshake
    /// Bytes to send to the server, in order.
    package var output: [UInt8] = []
    /// Why the server refused or broke the session (then `phase` is `.ended`).
    package private(set) var failure: Refused?
    /// The video FourCCs the server's connect result said it takes (`fourCcList`,
    /// `videoFourCcInfoMap`); nil when it said nothing of Enhanced RTMP.
    package private(set) var serverVideoFourCCs: Set<String>?
    /// The message stream createStream gave: media and publish go on it.
    package private(set) var streamID: UInt32 = 0

    private let writer = RtmpChunkStreamWriter()
    private let reader = RtmpChunkReader(maxMessageSize: 1 << 20)
    private var c1: [UInt8]
    private var handshake: [UInt8] = []
    private var transaction = 0.0
    /// Commands sent and awaiting their `_result`, by transaction id.
    private var awaiting: [Double: String] = [:]
    private var ackWindow: UInt64 = 0
    private var acknowledged: UInt64 = 0

    package init(address: RtmpAddress) {
        self.address = address
        // C1: time (zero), four zero bytes (the simple handshake), 1528 random bytes.
        c1 = [UInt8](repeating: 0, count: 8) + (0..<1528).map { _ in UInt8.random(in: 0...255) }
        output = [3] + c1
    }

    /// Whether the server takes `fourCC` (`hvc1`...) as Enhanced RTMP video. A server that said
    /// nothing of Enhanced RTMP is taken to (FFmpeg's listener, many CDNs: they take E-RTMP
    /// without saying so); one that listed its codecs must have listed it.
    package func serverTakes(_ fourCC: String) -> Bool {
        guard let list = serverVideoFourCCs else { return true }
        return list.contains(fourCC) || list.contains("*")
    }

    /// Bytes from the server.
    package func receive(_ bytes: UnsafeRawBufferPointer) {
        guard phase != .ended else { return }
        var rest = bytes[...]
        if phase == .handshake {
            // S0, S1, S2: 3073 bytes. C2 (S1 echoed) and connect go once S1 is in: nothing need wait for S2.
            let used = min(rest.count, 3073 - handshake.count)
            handshake += rest.prefix(used)
            rest = rest.dropFirst(used)
            if handshake.count >= 1537 && !sentConnect {
                guard handshake[0] == 3 else { return fail("the server does not speak RTMP (version \(handshake[0]))") }
                output += handshake[1..<1537]
                sendConnect()
            }
            guard handshake.count == 3073 else { return }
            phase = .commands
            handshake = []
            if rest.isEmpty { return }
        }
        let messages: [RtmpMessage]
        do { messages = try reader.feed(UnsafeRawBufferPointer(rebasing: rest)) } catch {
            return fail("the server broke the RTMP stream (\(error))")
        }
        for m in messages where phase != .ended { handle(m) }
        acknowledgeIfDue()
    }

    private var sentConnect = false

    private func sendConnect() {
        sentConnect = true
        writer.chunkSize = Self.chunkSize
        // Set Chunk Size goes out at 128 (the size the server reads until told otherwise).
        output += RtmpChunkWriter.chunks(RtmpMessage(type: RtmpChunkReader.MessageType.setChunkSize, streamID: 0, timestamp: 0,
                                                     payload: RtmpChunkWriter.uint32(UInt32(Self.chunkSize))), csid: 2)
        command("connect", [.object([
            Amf0Pair(name: "app", value: .string(address.app)),
            Amf0Pair(name: "type", value: .string("nonprivate")),
            Amf0Pair(name: "flashVer", value: .string("FMLE/3.0 (compatible; avgraph)")),
            Amf0Pair(name: "tcUrl", value: .string(address.tcUrl)),
            Amf0Pair(name: "fourCcList", value: .array(Self.fourCcList.map { .string($0) })),
        ])])
    }

    /// A command on the NetConnection (stream 0) or on the published stream.
    private func command(_ name: String, _ arguments: [Amf0Value], onStream: Bool = false, expectsResult: Bool = true) {
        transaction += 1
        if expectsResult { awaiting[transaction] = name }
        let payload = Amf0.encode([.string(name), .number(transaction)] + arguments)
        output += writer.chunks(RtmpMessage(type: RtmpChunkReader.MessageType.amf0Command, streamID: onStream ? streamID : 0, timestamp: 0,
                                            payload: payload), csid: onStream ? Csid.streamCommand : Csid.command)
    }

    private func fail(_ reason: String) {
        failure = Refused(description: reason)
        phase = .ended
    }

    private func handle(_ m: RtmpMessage) {
        typealias T = RtmpChunkReader.MessageType
        switch m.type {
        case T.windowAckSize where m.payload.count >= 4:
            ackWindow = UInt64(m.payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        case T.userControl where m.payload.count >= 6 && m.payload[0] == 0 && m.payload[1] == 6:
            // Ping request: answered with the same time (a server that pings closes a silent client).
            control(T.userControl, [0, 7] + m.payload[2..<6])
        case T.amf0Command, T.amf3Command:
            let body = m.type == T.amf3Command ? m.payload.dropFirst() : m.payload[...]
            guard let values = try? Amf0.decodeAll(body), let name = values.first?.string else { return }
            handleCommand(name, values)
        default: break
        }
    }

    private func handleCommand(_ name: String, _ values: [Amf0Value]) {
        let txid = values.count > 1 ? values[1].number ?? 0 : 0
        switch name {
        case "_result":
            guard let asked = awaiting.removeValue(forKey: txid) else { return }
            if asked == "connect" {
                serverVideoFourCCs = Self.announcedVideo(values.dropFirst(2))
                command("releaseStream", [.null, .string(address.stream)])
                command("FCPublish", [.null, .string(address.stream)])
                command("createStream", [.null])
            } else if asked == "createStream" {
                streamID = UInt32(values.count > 3 ? values[3].number ?? 1 : 1)
                command("publish", [.null, .string(address.stream), .string("live")], onStream: true, expectsResult: false)
            }
        case "_error":
            guard let asked = awaiting.removeValue(forKey: txid) else { return }
            // releaseStream and FCPublish are courtesies many servers do not know.
            guard asked == "connect" || asked == "createStream" else { return }
            fail("the server refused \(asked == "connect" ? "the connection" : "the stream")\(Self.reason(values))")
        case "onStatus":
            let info = values.count > 3 ? values[3] : .null
            let code = info["code"]?.string ?? ""
            if code == "NetStream.Publish.Start" {
                if phase == .commands { phase = .publishing }
            } else if info["level"]?.string == "error" || code.hasSuffix("BadName") || code.hasSuffix(".Failed") || code.hasSuffix("Rejected") {
                // The stream name is the key: never in a message.
                fail("the server refused to publish the stream\(Self.reason(values))")
            }
        default: break
        }
    }

    /// `: CODE (description)` from a status or error object, as the server said it.
    private static func reason(_ values: [Amf0Value]) -> String {
        let info = values.count > 3 ? values[3] : values.last ?? .null
        let code = info["code"]?.string ?? "", description = info["description"]?.string ?? ""
        if code.isEmpty && description.isEmpty { return "" }
        return ": " + [code, description.isEmpty ? "" : "(\(description))"].filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// The video FourCCs a connect result lists (in its properties or its information object).
    private static func announcedVideo(_ objects: ArraySlice<Amf0Value>) -> Set<String>? {
        var found: Set<String>?
        for o in objects {
            if case .array(let items)? = o["fourCcList"] { found = (found ?? []).union(items.compactMap(\.string)) }
            if case .object(let pairs)? = o["videoFourCcInfoMap"] { found = (found ?? []).union(pairs.map(\.name)) }
        }
        return found
    }

    private func control(_ type: UInt8, _ payload: [UInt8]) {
        output += writer.chunks(RtmpMessage(type: type, streamID: 0, timestamp: 0, payload: payload), csid: Csid.control)
    }

    /// Acknowledges each window of bytes the server asked for (a server may stop sending, or
    /// close, when a client never acknowledges).
    private func acknowledgeIfDue() {
        guard ackWindow > 0, phase != .ended, reader.received / ackWindow > acknowledged / ackWindow else { return }
        acknowledged = reader.received
        control(RtmpChunkReader.MessageType.acknowledgement, RtmpChunkWriter.uint32(UInt32(truncatingIfNeeded: acknowledged)))
    }

    // MARK: publishing

    /// An audio (8), video (9) or data (18) message on the published stream; `timestamp` in ms.
    package func send(type: UInt8, timestamp: UInt32, payload: [UInt8]) {
        guard phase == .publishing else { return }
        let csid = type == 8 ? Csid.audio : type == 9 ? Csid.video : Csid.data
        output += writer.chunks(RtmpMessage(type: type, streamID: streamID, timestamp: timestamp, payload: payload), csid: csid)
    }

    /// Ends the publish as FFmpeg and OBS do (FCUnpublish, deleteStream); the server may answer
    /// before the client closes.
    package func unpublish() {
        guard phase == .publishing else { return }
        command("FCUnpublish", [.null, .string(address.stream)], expectsResult: false)
        command("deleteStream", [.null, .number(Double(streamID))], expectsResult: false)
        phase = .ended
    }
}
