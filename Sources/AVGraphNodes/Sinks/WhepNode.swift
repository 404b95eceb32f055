import AVGraph
import AVGraphTransport
import CFFmpeg
import Foundation

/// `whep`: plays the run's encoded stream to any number of WebRTC viewers (WHEP, RFC 9725's
/// playback side) on the run's `--http` server at `/whep/NODE`: a viewer POSTs its SDP offer
/// and gets `201 Created` with the answer and its session's `Location` (`PATCH` 204, `DELETE`
/// to leave). Media go over one UDP port for every viewer of the run (`--webrtc-udp`,
/// `--webrtc-host`). Each access unit is packetized once; each viewer gets its own sequence
/// numbers and SRTP, starts at a keyframe (asking the encoder for one), has NACKs answered from
/// a history, and when its link loses a tenth of the video has pictures dropped to the next
/// keyframe for it alone. PLI and FIR reach the encoder (`h264`) as keyframe requests,
/// coalesced to one a second whatever the number of viewers. Viewers present the operator
/// page's token (`Authorization: Bearer`) unless `viewers: open`.
public final class WhepNode: Sink, Node {
    public static let typeName = "whep"
    public static let summary = "plays encoded H.264 and Opus to WebRTC viewers (WHEP) on the run's --http server, at /whep/NODE"
    public static let inputs = [PadSpec("in", [.encodedVideo, .encodedAudio], variadic: true,
                                        doc: "one encoded video stream (H.264 without B-frames) and/or one encoded audio stream (Opus: browsers play no AAC over WebRTC)")]
    enum Viewers: String, CaseIterable, Sendable { case token, open }
    static let viewers = Setting.choice("viewers", default: Viewers.token,
        doc: "token: a viewer presents the operator page's token as Authorization: Bearer TOKEN; open: anyone who can reach the --http server may watch")
    static let maxViewers = Setting.int("max-viewers", 1...10_000, default: 100,
        doc: "viewers watching at once, at most; past it an offer is answered 503")
    public static let options = [viewers.spec, maxViewers.spec]
    public static let events: [any NodeEvent.Type] = [WhepViewersEvent.self]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard !n.inputs.isEmpty else { throw NegotiationError("needs an encoded video and/or audio input") }
        for kind in [MediaKind.encodedVideo, .encodedAudio] where n.inputs.filter({ $0.format.kind == kind }).count > 1 {
            throw NegotiationError("WebRTC viewers get one video and one audio stream; got several \(kind) inputs")
        }
        for input in n.inputs {
            let f = input.format
            if f.kind == .encodedVideo, f.codec != "h264" {
                throw NegotiationError("whep sends H.264 video, not \(f.codec.isEmpty ? "raw pictures" : f.codec) (from '\(input.from)')", hint: "encode with h264 (bframes: 0)")
            }
            if f.kind == .encodedAudio, f.codec != "opus" {
                throw NegotiationError("whep sends Opus audio, not \(f.codec.isEmpty ? "raw samples" : f.codec) (from '\(input.from)'): browsers play no AAC over WebRTC",
                                       hint: "encode the audio with opus")
            }
            guard f.kind.isEncoded else { throw NegotiationError("input '\(input.from)' is not an encoded stream", hint: "encode it first (h264, opus)") }
        }
        return []
    }

    private let name: String
    private let web: WebEndpoints?
    private let kinds: [WhepViewer.Kind]
    private let maxViewerCount: Int
    private let ssrcs = (video: UInt32.random(in: 1...UInt32.max), audio: UInt32.random(in: 1...UInt32.max))
    private let offsets = (video: UInt32.random(in: 0...UInt32.max), audio: UInt32.random(in: 0...UInt32.max))
    private var hub: WhepHub?
    private var parameterSets: [[UInt8]] = []
    /// The NAL length size of an avcC stream; nil: Annex B.
    private var lengthSize: Int?
    private var described = false
    private var warnedNoServer = false, warnedReordered = false
    private var reported = WhepHub.Tally()
    private var lastReport = 0.0

    public init(_ setup: NodeSetup) throws {
        name = setup.name
        web = setup.web
        kinds = setup.inputs.map { $0.format.kind == .encodedVideo ? .video : .audio }
        maxViewerCount = setup[Self.maxViewers]
        if let web = setup.web {
            let open = setup[Self.viewers] == .open
            let node = setup.name
            web.route("/whep/\(node)") { request in Self.answer(request, node: node, open: open, web: web) }
        }
    }

    /// The run's shared WebRTC port and thread, made by the first who needs it.
    static func hub(_ web: WebEndpoints) throws -> WhepHub? {
        let s = web.settings
        guard let host = s.httpHost else { return nil }
        return try web.shared("whep-hub") {
            var settings = WhepHub.Settings(host: host, udpPort: s.udpPort)
            settings.advertise = s.advertise
            let hub = try WhepHub(settings)
            hub.start()
            return hub
        }
    }

    static let cors = ["Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "POST, PATCH, DELETE, OPTIONS",
                       "Access-Control-Allow-Headers": "Authorization, Content-Type, If-Match", "Access-Control-Expose-Headers": "Location, ETag, Link",
                       "Cache-Control": "no-store"]

    /// `/whep/NODE` (POST an offer) and `/whep/NODE/session/ID` (PATCH, DELETE), on the server's threads.
    static func answer(_ r: WebEndpoints.Request, node: String, open: Bool, web: WebEndpoints) -> WebEndpoints.Response {
        func reply(_ status: Int, _ text: String = "", _ headers: [String: String] = [:]) -> WebEndpoints.Response {
            .init(status: status, headers: cors.merging(headers) { _, b in b }.merging(text.isEmpty ? [:] : ["Content-Type": "text/plain; charset=utf-8"]) { a, _ in a },
                  body: Array(text.utf8))
        }
        let base = "/whep/\(node)"
        let rest = r.path.dropFirst(base.count).split(separator: "/").map(String.init)
        if r.method == "OPTIONS" { return reply(204, "", ["Accept-Post": "application/sdp"]) }
        if !open {
            let token = web.settings.token ?? ""
            guard let presented = r.bearer, !token.isEmpty, Self.same(presented, token) else {
                return reply(401, "a viewer presents the page's token: Authorization: Bearer TOKEN\n", ["WWW-Authenticate": "Bearer"])
            }
        }
        let hub: WhepHub?
        do { hub = try Self.hub(web) } catch { return reply(503, "WebRTC media cannot be sent: \(error)\n") }
        guard let hub else { return reply(503, "the run serves no --http\n") }
        switch (r.method, rest.count) {
        case ("POST", 0):
            if let type = r.headers["content-type"], !type.lowercased().hasPrefix("application/sdp") {
                return reply(415, "the offer is application/sdp, not \(type)\n")
            }
            let answered = hub.offer(node: node, sdp: String(decoding: r.body, as: UTF8.self), sessionPath: "\(base)/session")
            return .init(status: answered.status, headers: cors.merging(answered.headers) { _, b in b }, body: Array(answered.body.utf8))
        case ("DELETE", 2) where rest[0] == "session":
            return hub.delete(node: node, id: rest[1]) ? reply(200) : reply(404, "no such session\n")
        case ("PATCH", 2) where rest[0] == "session":
            // ICE-lite: trickled candidates need no answer; the checks tell the address.
            return hub.exists(node: node, id: rest[1]) ? reply(204) : reply(404, "no such session\n")
        case (_, 0), (_, 2):
            return reply(405, "", ["Allow": "POST, PATCH, DELETE, OPTIONS"])
        default:
            return reply(404, "a WHEP endpoint is \(base)\n")
        }
    }

    /// Constant-time comparison of the presented token with the page's.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private func start(_ out: Outlet) throws {
        guard hub == nil, let web else { return }
        do { hub = try Self.hub(web) } catch { throw MediaError("cannot send WebRTC media: \(error)") }
        guard let hub else {
            if !warnedNoServer {
                warnedNoServer = true
                out.warning("the run serves no --http: no viewer can reach /whep/\(name)")
            }
            return
        }
        hub.add(node: name, .init(video: kinds.contains(.video) ? .init(kind: "video", codec: "h264", ssrc: ssrcs.video) : nil,
                                  audio: kinds.contains(.audio) ? .init(kind: "audio", codec: "opus", ssrc: ssrcs.audio) : nil,
                                  maxViewers: maxViewerCount, keyframes: nil))
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let packet = buffer.packet else { return }
        if hub == nil { try start(out) }
        guard let hub else { return }
        let seconds = Double(packet.pts) * packet.timeBase.double
        // The wallclock when the run's clock was at this media time: what sender reports map RTP time to.
        let wallclock = Date().timeIntervalSince1970 - (out.realtime ? out.clock - seconds : 0)
        if kinds[input] == .audio {
            let timestamp = offsets.audio &+ UInt32(truncatingIfNeeded: Int64((seconds * 48000).rounded()))
            guard let data = packet.av.pointee.data, packet.byteCount > 0 else { return }
            let payload = Array(UnsafeBufferPointer(start: data, count: packet.byteCount))
            hub.publish(node: name, kind: .audio, [RtpOutgoing(payload: payload, timestamp: timestamp, marker: false, startsPicture: true, keyframe: true, wallclock: wallclock)])
            return
        }
        if !described || packet.newExtradata != nil { describe(packet, hub) }
        if packet.dts != packet.pts, packet.dts != avg_nopts(), !warnedReordered {
            warnedReordered = true
            out.warning("the H.264 has B-frames (pictures out of order): WebRTC players show them stuttering; encode with bframes: 0")
        }
        let timestamp = offsets.video &+ UInt32(truncatingIfNeeded: Int64((seconds * 90000).rounded()))
        guard let data = packet.av.pointee.data, packet.byteCount > 0 else { return }
        let (payloads, keyframe) = H264Packetizer.payloads(UnsafeRawBufferPointer(start: data, count: packet.byteCount),
                                                            lengthSize: lengthSize, parameterSets: parameterSets)
        guard !payloads.isEmpty else { return }
        let packets = payloads.enumerated().map { i, p in
            RtpOutgoing(payload: p, timestamp: timestamp, marker: i == payloads.count - 1, startsPicture: i == 0, keyframe: keyframe || packet.isKeyframe, wallclock: wallclock)
        }
        hub.publish(node: name, kind: .video, packets)
    }

    /// The stream's parameter sets (avcC or Annex B), its NAL length size, its profile for the
    /// answer, and the encoder's keyframe requests.
    private func describe(_ packet: Packet, _ hub: WhepHub) {
        described = true
        let extradata = packet.newExtradata ?? packet.stream.extradata
        if let record = AvcConfiguration(extradata) {
            lengthSize = record.lengthSize
            parameterSets = record.sequenceSets + record.pictureSets
        } else if let record = AvcConfiguration(annexB: extradata) {
            lengthSize = nil
            parameterSets = record.sequenceSets + record.pictureSets
        } else {
            lengthSize = nil
        }
        let profile = parameterSets.first.flatMap(H264Packetizer.profileLevelID)
        let keyframes = packet.stream.keyframes
        hub.update(node: name) {
            $0.video?.profileLevelID = profile
            $0.keyframes = keyframes
        }
    }

    override public func tick(_ out: Outlet) throws {
        if hub == nil { try start(out) }
        guard let hub else { return }
        // The hub's notes (shared by the run's whep sinks) are said by whichever sink reads them first.
        for note in hub.takeNotes() { out.warning(note) }
        let t = hub.tally(node: name)
        out.report("viewers", Double(t.connected))
        let now = Monotonic.now
        if t.connected != reported.connected || (t.lastFirstPicture != reported.lastFirstPicture && now - lastReport >= 1) {
            reported = t
            lastReport = now
            out.event(WhepViewersEvent(watching: t.connected, served: t.served, firstPictureSeconds: t.lastFirstPicture))
        }
    }

    override public func finish(_ out: Outlet) throws {
        guard let hub else { return }
        let t = hub.tally(node: name)
        out.event(WhepViewersEvent(watching: t.connected, served: t.served, firstPictureSeconds: t.lastFirstPicture))
        hub.remove(node: name)
    }

    override public func abort() { hub?.remove(node: name) }
}
