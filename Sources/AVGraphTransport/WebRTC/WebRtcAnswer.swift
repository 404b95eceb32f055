/// The answer a receiving endpoint (WHIP) gives an offer: for each audio and video section the
/// first codec of the offer's order that avgraph decodes, BUNDLE and rtcp-mux only, avgraph as
/// ICE-lite with its host candidates and as the DTLS server (`setup:passive`). What it refuses
/// it names: a malformed or unsupported offer (HTTP 400), no codec avgraph takes (HTTP 406).
package struct WebRtcAnswer: Sendable {
    package struct Local: Sendable {
        package var ufrag: String
        package var password: String
        /// SHA-256 of the DTLS certificate, `AB:CD:...`.
        package var fingerprint: String
        /// Addresses and the UDP port that media may come to (every advertised address).
        package var candidates: [(address: String, port: Int)]

        package init(ufrag: String, password: String, fingerprint: String, candidates: [(address: String, port: Int)]) {
            self.ufrag = ufrag
            self.password = password
            self.fingerprint = fingerprint
            self.candidates = candidates
        }
    }

    /// What was taken for one section.
    package struct Chosen: Equatable, Sendable {
        package var kind: String
        package var mid: String
        package var payloadType: UInt8
        package var codec: MediaDescription.Codec
        package var parameters: [String: String]
        /// The header extension id of the transport-wide sequence number, when both sides use it.
        package var transportWide: UInt8? = nil
    }

    package static let transportWideURI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"

    /// The offer's id for the transport-wide sequence number in `m` (`a=extmap:ID[/DIR] URI`).
    static func transportWideID(_ m: MediaDescription) -> UInt8? {
        for value in m.attributes.filter({ $0.name == "extmap" }).compactMap(\.value) {
            let parts = value.split(separator: " ")
            // `a=extmap:/DIR URI` has no id before its slash: split gives nothing there to index.
            guard parts.count >= 2, parts[1] == transportWideURI, let text = parts[0].split(separator: "/", omittingEmptySubsequences: false).first,
                  let id = UInt8(text), (1...14).contains(id) else { continue }
            return id
        }
        return nil
    }

    package enum Refusal: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case noCodec(String)
        package var status: Int { if case .noCodec = self { 406 } else { 400 } }
        package var description: String { switch self { case .malformed(let s), .noCodec(let s): s } }
    }

    /// Video codecs avgraph decodes, by the rtpmap name, in no order of its own: the offer's wins.
    package static let videoCodecs: Set<String> = ["h264", "vp8", "vp9", "av1", "h265"]

    package let sdp: String
    package let chosen: [Chosen]
    /// The peer's ICE credentials and DTLS fingerprint, for the checks and the handshake.
    package let remoteUfrag: String
    package let remotePassword: String
    package let remoteFingerprint: String
    /// avgraph's DTLS role: the server, unless the offer made itself the server (`a=setup:passive`).
    package let dtlsRole: DtlsSession.Role

    /// `taking`: the video codecs to accept (a receiver without a depacketizer for one takes fewer).
    package init(offer: SessionDescription, local: Local, sessionID: UInt64, taking video: Set<String> = videoCodecs) throws(Refusal) {
        let peer = try WebRtcOffer(offer)
        var chosen: [Chosen] = []
        var body: [String] = []
        for m in offer.media {
            let (mid, inactive) = try peer.section(m)
            if let inactive {
                body += inactive
                continue
            }
            guard let c = Self.pick(m, video: video) else {
                let offered = m.formats.compactMap { m.codecs[$0].map { "\($0.name)/\($0.clockRate)" } }
                throw .noCodec("no \(m.kind) codec avgraph decodes in section '\(mid)' (offered: \(offered.joined(separator: ", ")); takes \(m.kind == "audio" ? "opus/48000/2" : Self.named(video)))")
            }
            let offered = m.attributes.filter { $0.name == "rtcp-fb" }.compactMap(\.value)
            let transportWide = offered.contains("\(c.pt) transport-cc") ? Self.transportWideID(m) : nil
            chosen.append(Chosen(kind: m.kind, mid: mid, payloadType: c.pt, codec: c.codec, parameters: m.parameters[c.pt] ?? [:], transportWide: transportWide))
            body += Self.section(m, mid: mid, pt: c.pt, codec: c.codec, local: local, setup: peer.answerSetup)
        }
        var lines = ["v=0", "o=avgraph \(sessionID) 2 IN IP4 127.0.0.1", "s=-", "t=0 0",
                     "a=group:BUNDLE \(offer.media.compactMap(\.mid).joined(separator: " "))", "a=ice-lite"]
        lines += body
        sdp = lines.joined(separator: "\r\n") + "\r\n"
        self.chosen = chosen
        remoteUfrag = peer.ufrag
        remotePassword = peer.password
        remoteFingerprint = peer.fingerprint
        dtlsRole = peer.role
    }

    private static func named(_ codecs: Set<String>) -> String {
        ["h264": "H.264 packetization-mode 1", "vp8": "VP8", "vp9": "VP9", "av1": "AV1", "h265": "H.265"].filter { codecs.contains($0.key) }
            .sorted { $0.key < $1.key }.map(\.value).joined(separator: ", ")
    }

    private static func pick(_ m: MediaDescription, video: Set<String>) -> (pt: UInt8, codec: MediaDescription.Codec)? {
        for pt in m.formats {
            guard let codec = m.codecs[pt] else { continue }
            if m.kind == "audio", codec.name == "opus", codec.clockRate == 48000 { return (pt, codec) }
            if m.kind == "video", video.contains(codec.name), codec.clockRate == 90000 {
                // GStreamer's webrtcbin may offer H.264 without a=fmtp: that is mode 1 as it sends it.
                if codec.name == "h264", let mode = m.parameters[pt]?["packetization-mode"], mode != "1" { continue }
                return (pt, codec)
            }
        }
        return nil
    }

    private static func section(_ m: MediaDescription, mid: String, pt: UInt8, codec: MediaDescription.Codec, local: Local, setup: String) -> [String] {
        let port = local.candidates.first?.port ?? 9
        var lines = ["m=\(m.kind) \(port) \(m.proto) \(pt)", "c=IN IP4 0.0.0.0", "a=mid:\(mid)",
                     "a=\(m.has("inactive") || m.has("recvonly") ? "inactive" : "recvonly")", "a=rtcp-mux",
                     "a=ice-ufrag:\(local.ufrag)", "a=ice-pwd:\(local.password)", "a=fingerprint:sha-256 \(local.fingerprint)", "a=setup:\(setup)"]
        let name = codec.name == "h265" ? "H265" : codec.name == "opus" ? "opus" : codec.name.uppercased()
        lines.append("a=rtpmap:\(pt) \(name)/\(codec.clockRate)\(m.kind == "audio" ? "/\(codec.channels)" : "")")
        if let fmtp = m.attributes.first(where: { $0.name == "fmtp" && $0.value?.hasPrefix("\(pt) ") == true })?.value {
            lines.append("a=fmtp:\(fmtp)")
        }
        // Feedback avgraph gives: NACK and PLI for video; transport-wide congestion control
        // feedback where the offer has it (with its header extension), so the sender's rate climbs.
        let offered = m.attributes.filter { $0.name == "rtcp-fb" }.compactMap(\.value).filter { $0.hasPrefix("\(pt) ") }
        for fb in ["nack", "nack pli", "transport-cc"] where offered.contains("\(pt) \(fb)") { lines.append("a=rtcp-fb:\(pt) \(fb)") }
        if offered.contains("\(pt) transport-cc"), let id = transportWideID(m) { lines.append("a=extmap:\(id) \(transportWideURI)") }
        for (i, c) in local.candidates.enumerated() {
            // Host candidates (RFC 8445 5.1.2.1): type preference 126, one component (rtcp-mux).
            lines.append("a=candidate:\(i + 1) 1 udp \(2_130_706_431 - i) \(c.address) \(c.port) typ host")
        }
        lines.append("a=end-of-candidates")
        return lines
    }
}
