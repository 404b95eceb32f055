import Foundation

/// What a listening RTMP source admits: the URL's application, the keys, the bounds.
package struct RtmpPolicy: Sendable {
    package var app: String
    package var keys: PublisherKeys
    package var maxWidth = 3840
    package var maxHeight = 2160
    package var maxRate = 120.0
    /// Every application is open (`avgraph serve`: the app is the publisher's to name).
    package var anyApp = false
    /// Every stream key is admitted here (`avgraph serve --auth/--open`: another asks, or none).
    package var anyKey = false
    /// Called with each data message's name, values and timestamp (ms on the publisher's clock:
    /// its pictures' clock) of an admitted publisher (`onMetaData`, `onPrivacy`...), on the
    /// listener's thread, before the pictures after it go on to the demuxer.
    package var onData: (@Sendable (_ name: String, _ values: [Amf0Value], _ timestamp: UInt32) -> Void)?

    package init(app: String, keys: PublisherKeys, maxWidth: Int = 3840, maxHeight: Int = 2160, maxRate: Double = 120.0,
                 anyApp: Bool = false, anyKey: Bool = false,
                 onData: (@Sendable (_ name: String, _ values: [Amf0Value], _ timestamp: UInt32) -> Void)? = nil) {
        self.app = app
        self.keys = keys
        self.maxWidth = maxWidth
        self.maxHeight = maxHeight
        self.maxRate = maxRate
        self.anyApp = anyApp
        self.anyKey = anyKey
        self.onData = onData
    }

    /// Applications a publisher may connect to: the URL's and those named in `app/stream` keys.
    package func admitsApp(_ app: String) -> Bool {
        anyApp || app == self.app || keys.current().contains { $0.contains("/") && String($0[..<$0.lastIndex(of: "/")!]) == app }
    }
}

extension RtmpPolicy {

    /// so the memberwise initializer stays.
    package init(app: String, keys: [String]) throws {
        self.init(app: app, keys: try PublisherKeys(keys: keys, file: nil, environment: [:], urlKey: nil))
    }
}

/// The server side of one RTMP connection, without the socket: bytes from the peer in, bytes
/// to send and FLV bytes (once a publisher is admitted) out. The simple handshake, the chunk
/// stream, the commands a publisher sends (connect, releaseStream, FCPublish, createStream,
/// publish) and its audio, video and data messages as FLV tags.
package final class RtmpConnection {
    package enum Phase: Equatable { case handshake, handshakeAck, commands, publishing, ended }

    package let policy: RtmpPolicy
    package private(set) var phase = Phase.handshake
    /// Bytes to send to the peer.
    package var output: [UInt8] = []
    /// FLV (header, then tags) of the admitted publisher, not yet taken.
    package var flv: [UInt8] = []
    /// Set when the connection is refused (the peer's fault): why, for a warning. Close after sending `output`.
    package private(set) var refusal: String?
    /// The publisher's first media passed the bounds: its session can start.
    package private(set) var ready = false
    /// Set by the server: another publisher holds the source (this one is refused).
    package var othersPublishing = false
    /// The publish command was accepted (the key, and no other publisher).
    package private(set) var admitted = false
    /// The peer asked to stop publishing (deleteStream, FCUnpublish).
    package var finished: Bool { phase == .ended && refusal == nil }

    private var handshake: [UInt8] = []
    private let chunks = RtmpChunkReader(maxMessageSize: 64 * 1024)
    /// The application the peer connected to, and the stream name it published (once it has).
    package private(set) var app = ""
    package private(set) var streamName = ""
    private var connected = false
    private var outChunkSize = 128
    private var ackWindow: UInt64 = 2_500_000
    private var acknowledged: UInt64 = 0
    private var nalLengthSize = 4
    private var videoReader = FlvVideoReader()
    private var recentPictures: [UInt32] = []
    package static let maxMessageSize = 0xFF_FFFF

    package init(policy: RtmpPolicy) { self.policy = policy }

    /// Bytes from the peer. After a refusal or the end, nothing more is read.
    package func receive(_ bytes: UnsafeRawBufferPointer) {
        guard phase != .ended else { return }
        if phase == .handshake || phase == .handshakeAck {
            let used = min(bytes.count, (phase == .handshake ? 1537 : 1536) - handshake.count)
            handshake += bytes.prefix(used)
            if phase == .handshake && handshake.count == 1537 {
                guard handshake[0] == 3 else { return refuse("not RTMP") }
                // S0, S1 (time, zero version: the simple handshake), S2 (C1 echoed).
                output += [3] + [UInt8](repeating: 0, count: 8) + (0..<1528).map { _ in UInt8.random(in: 0...255) }
                output += handshake[1...]
                handshake = []
                phase = .handshakeAck
            } else if phase == .handshakeAck && handshake.count == 1536 {
                phase = .commands
                handshake = []
            }
            let rest = UnsafeRawBufferPointer(rebasing: bytes[used...])
            if !rest.isEmpty && phase == .commands { receive(rest) }
            return
        }
        let messages: [RtmpMessage]
        do { messages = try chunks.feed(bytes) } catch {
            return refuse(phase == .publishing ? "broke the RTMP stream (\(error))" : "not RTMP (\(error))")
        }
        for m in messages where phase != .ended { handle(m) }
    }

    /// The acknowledgement a window of received bytes asks for, if one is due. The listener sends
    /// it only when it has read everything the socket holds: a publisher that has already closed
    /// (FFmpeg closes right after its last write) answers any byte it receives with a reset, and
    /// a reset throws away what is still in its send queue. While the listener is behind (a burst
    /// after a stall), an ack then would cost the end of the broadcast; acks are cumulative, so
    /// one sent once it has caught up says the same. Due once the bytes read cross a multiple of
    /// the window (not a window after the last ack, which would drift past the publisher's
    /// boundaries and keep an ack waiting for its next picture).
    package func acknowledgeIfDue() {
        guard phase == .commands || phase == .publishing, chunks.received / ackWindow > acknowledged / ackWindow else { return }
        acknowledged = chunks.received
        send(RtmpMessage(type: RtmpChunkReader.MessageType.acknowledgement, streamID: 0, timestamp: 0,
                         payload: RtmpChunkWriter.uint32(UInt32(truncatingIfNeeded: acknowledged))), csid: 2)
    }

    private func refuse(_ reason: String) {
        refusal = reason
        phase = .ended
    }

    private func send(_ m: RtmpMessage, csid: UInt8) {
        output += RtmpChunkWriter.chunks(m, csid: csid, chunkSize: outChunkSize)
    }

    private func command(_ values: [Amf0Value], streamID: UInt32 = 0) {
        send(RtmpMessage(type: RtmpChunkReader.MessageType.amf0Command, streamID: streamID, timestamp: 0, payload: Amf0.encode(values)),
             csid: streamID == 0 ? 3 : 5)
    }

    private func status(_ level: String, _ code: String, _ description: String, txid: Double = 0, streamID: UInt32) {
        command([.string("onStatus"), .number(txid), .null, .object([
            Amf0Pair(name: "level", value: .string(level)), Amf0Pair(name: "code", value: .string(code)),
            Amf0Pair(name: "description", value: .string(description)),
        ])], streamID: streamID)
    }

    private func handle(_ m: RtmpMessage) {
        typealias T = RtmpChunkReader.MessageType
        switch m.type {
        case T.windowAckSize where m.payload.count >= 4:
            ackWindow = max(UInt64(m.payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }), 4096)
        case T.amf0Command, T.amf3Command:
            let body = m.type == T.amf3Command ? m.payload.dropFirst() : m.payload[...]
            guard let values = try? Amf0.decodeAll(body), let name = values.first?.string else {
                return refuse(phase == .publishing ? "sent a command that is not AMF0" : "not RTMP (a command that is not AMF0)")
            }
            handleCommand(name, values, streamID: m.streamID)
        case T.amf0Data where phase == .publishing:
            data(m)
        case T.audio where phase == .publishing:
            // An AAC frame after its header, or any other codec's: the session has media.
            if m.payload.count >= 2 && !Self.isAudioSequenceStart(m.payload) { ready = true }
            tag(8, m.timestamp, m.payload[...])
        case T.video where phase == .publishing:
            if let problem = videoProblem(m) { return refuse(problem) }
            ready = true
            tag(9, m.timestamp, m.payload[...])
        default: break
        }
    }

    private func handleCommand(_ name: String, _ values: [Amf0Value], streamID: UInt32) {
        let txid = values.count > 1 ? values[1].number ?? 0 : 0
        switch name {
        case "connect":
            app = (values.count > 2 ? values[2]["app"]?.string : nil) ?? ""
            while app.hasSuffix("/") { app.removeLast() }
            guard policy.admitsApp(app) else {
                command([.string("_error"), .number(txid), .null, .object([
                    Amf0Pair(name: "level", value: .string("error")), Amf0Pair(name: "code", value: .string("NetConnection.Connect.Rejected")),
                    Amf0Pair(name: "description", value: .string("unknown application")),
                ])])
                return refuse("refused: wrong app")
            }
            send(RtmpMessage(type: RtmpChunkReader.MessageType.windowAckSize, streamID: 0, timestamp: 0, payload: RtmpChunkWriter.uint32(2_500_000)), csid: 2)
            send(RtmpMessage(type: RtmpChunkReader.MessageType.setPeerBandwidth, streamID: 0, timestamp: 0, payload: RtmpChunkWriter.uint32(2_500_000) + [2]), csid: 2)
            send(RtmpMessage(type: RtmpChunkReader.MessageType.setChunkSize, streamID: 0, timestamp: 0, payload: RtmpChunkWriter.uint32(4096)), csid: 2)
            outChunkSize = 4096
            connected = true
            var properties = [Amf0Pair(name: "fmsVer", value: .string("FMS/3,0,1,123")), Amf0Pair(name: "capabilities", value: .number(31))]
            if values.count > 2 { properties += Self.enhancedRtmpAnswer(values[2]) }
            command([.string("_result"), .number(txid), .object(properties),
                     .object([Amf0Pair(name: "level", value: .string("status")), Amf0Pair(name: "code", value: .string("NetConnection.Connect.Success")),
                              Amf0Pair(name: "description", value: .string("Connection succeeded.")), Amf0Pair(name: "objectEncoding", value: .number(0))])])
        case "releaseStream", "FCPublish":
            command([.string("_result"), .number(txid), .null, .undefined])
        case "createStream":
            command([.string("_result"), .number(txid), .null, .number(1)])
        case "publish":
            guard phase == .commands, connected else { return refuse("not RTMP (publish before connect)") }
            let stream = values.count > 3 ? values[3].string ?? "" : ""
            let candidates = app == policy.app || policy.anyApp ? [stream, app + "/" + stream] : [app + "/" + stream]
            guard policy.anyKey || policy.keys.admits(candidates) else {
                status("error", "NetStream.Publish.BadName", "unknown stream key", streamID: streamID)
                return refuse("refused: unknown key")
            }
            guard !othersPublishing else {
                status("error", "NetStream.Publish.BadName", "another publisher is live", streamID: streamID)
                return refuse("refused: another publisher is live on this source")
            }
            // Stream Begin, then Publish.Start: the publisher may send.
            send(RtmpMessage(type: RtmpChunkReader.MessageType.userControl, streamID: 0, timestamp: 0, payload: [0, 0] + RtmpChunkWriter.uint32(streamID)), csid: 2)
            status("status", "NetStream.Publish.Start", "publishing", streamID: streamID)
            chunks.maxMessageSize = Self.maxMessageSize
            phase = .publishing
            admitted = true
            streamName = stream
            flv = Array("FLV".utf8) + [1, 5, 0, 0, 0, 9, 0, 0, 0, 0]
        case "FCUnpublish", "deleteStream", "closeStream":
            guard phase == .publishing else { break }
            // Answered as nginx-rtmp does (on the stream createStream gave), so the client sees
            // its stop acknowledged and closes first: GStreamer's rtmp2sink calls a server that
            // closes under it an error.
            status("status", "NetStream.Unpublish.Success", "Stop publishing", streamID: 1)
            if txid != 0 { command([.string("_result"), .number(txid), .null, .undefined]) }
            phase = .ended
        case "play":
            refuse("refused: not a publisher (play)")
        default: break
        }
    }

    /// A data message: its name to the hook, `@setDataFrame` taken off (as a file has it), on to FLV.
    private func data(_ m: RtmpMessage) {
        var body = m.payload[...]
        guard var name = Amf0.leadingString(body) else { return }
        if name == "@setDataFrame" {
            var reader = Amf0.Reader(bytes: body)
            guard (try? reader.value(depth: 0)) != nil else { return }
            body = body.dropFirst(reader.offset)
            guard let inner = Amf0.leadingString(body) else { return }
            name = inner
        }
        if let onData = policy.onData, let values = try? Amf0.decodeAll(body) { onData(name, Array(values.dropFirst()), m.timestamp) }
        tag(18, m.timestamp, body)
    }

    private func tag(_ type: UInt8, _ time: UInt32, _ payload: ArraySlice<UInt8>) {
        guard !payload.isEmpty else { return }
        let n = payload.count
        flv += [type, UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF),
                UInt8(time >> 16 & 0xFF), UInt8(time >> 8 & 0xFF), UInt8(time & 0xFF), UInt8(time >> 24), 0, 0, 0]
        flv += payload
        flv += RtmpChunkWriter.uint32(UInt32(n + 11))
    }

    /// Why a video message is refused (a codec avgraph does not decode, a picture over max-size
    /// declared in its sequence header or in band: H.264 and HEVC SPS, AV1 sequence header, VP9
    /// keyframe; pictures faster than max-rate), or nil.
    private func videoProblem(_ m: RtmpMessage) -> String? {
        let packets: [FlvVideoPacket]
        do { packets = try videoReader.read(m.payload[...]) } catch { return "refused: \(error)" }
        if packets.contains(where: { $0.kind == .codedFrames }), let limit = rateProblem(m.timestamp) { return limit }
        for p in packets {
            let sizes: [VideoSequenceSize.Size]
            if p.kind == .sequenceStart {
                if let n = VideoSequenceSize.nalLengthSize(p.codec, config: p.body) { nalLengthSize = n }
                sizes = VideoSequenceSize.of(p.codec, config: p.body)
            } else {
                sizes = VideoSequenceSize.of(p.codec, frames: p.body, nalLengthSize: nalLengthSize)
            }
            for size in sizes where size.width > policy.maxWidth || size.height > policy.maxHeight {
                return "refused: \(size.width)x\(size.height) pictures are over max-size \(policy.maxWidth)x\(policy.maxHeight)"
            }
        }
        return nil
    }

    /// Enhanced RTMP: to a client that says it speaks it (`fourCcList`, `videoFourCcInfoMap`,
    /// `capsEx` in its connect), the codecs avgraph decodes, as the server's connect result
    /// states them: of the client's `fourCcList` those it takes, and each as decodable (1) in
    /// the info maps; capsEx: multitrack (the first track is taken) and ModEx (parsed, skipped).
    package static func enhancedRtmpAnswer(_ connect: Amf0Value) -> [Amf0Pair] {
        let asked = connect["fourCcList"]
        guard asked != nil || connect["videoFourCcInfoMap"] != nil || connect["capsEx"] != nil else { return [] }
        let video = FlvVideoCodec.allCases.map(\.rawValue)
        let audio = FlvAudio.enhancedFourCCs
        var list = video + audio
        if case .array(let items)? = asked, !items.contains(where: { $0.string == "*" }) {
            let theirs = Set(items.compactMap(\.string))
            list = list.filter { theirs.contains($0) }
        }
        return [
            Amf0Pair(name: "fourCcList", value: .array(list.map { .string($0) })),
            Amf0Pair(name: "videoFourCcInfoMap", value: .object(video.map { Amf0Pair(name: $0, value: .number(1)) })),
            Amf0Pair(name: "audioFourCcInfoMap", value: .object(audio.map { Amf0Pair(name: $0, value: .number(1)) })),
            Amf0Pair(name: "capsEx", value: .number(Double(2 | 4))),
        ]
    }

    /// An audio message that only configures the decoder (AAC's AudioSpecificConfig, an
    /// Enhanced RTMP sequence start): no sound yet.
    package static func isAudioSequenceStart(_ p: [UInt8]) -> Bool {
        guard p.count >= 2 else { return true }
        return (p[0] >> 4 == 10 && p[1] == 0) || (p[0] >> 4 == 9 && p[0] & 0x0F == 0)
    }

    /// Pictures within the last second of the stream's own time, against max-rate (with room
    /// for timestamps rounded to milliseconds).
    private func rateProblem(_ time: UInt32) -> String? {
        recentPictures.append(time)
        recentPictures.removeAll { time &- $0 >= 1000 && $0 <= time }
        if Double(recentPictures.count) > policy.maxRate * 1.1 + 2 {
            return "refused: more than \(Int(policy.maxRate)) pictures a second (max-rate)"
        }
        return nil
    }
}
