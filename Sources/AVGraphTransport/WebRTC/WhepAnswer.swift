/// The answer a sending endpoint (WHEP) gives a viewer's offer: for each audio and video
/// section, the offer's payload type for what avgraph sends on it (H.264 in packetization mode 1,
/// the offered profile that matches the stream's first; Opus at 48 kHz), `sendonly`, BUNDLE and
/// rtcp-mux only, avgraph as ICE-lite with its host candidates and (unless the offer took that
/// role) the DTLS server. A section avgraph has nothing for is answered inactive; an offer with
/// no section avgraph can fill is refused (HTTP 406), a malformed one too (400).
package struct WhepAnswer: Sendable {
    /// What avgraph sends, one per kind.
    package struct Outgoing: Sendable, Equatable {
        package var kind: String
        /// `h264` or `opus`.
        package var codec: String
        package var ssrc: UInt32
        /// H.264: the stream's `profile-level-id` (from its SPS), to pick the offer's matching format.
        package var profileLevelID: String?
        package init(kind: String, codec: String, ssrc: UInt32, profileLevelID: String? = nil) {
            (self.kind, self.codec, self.ssrc, self.profileLevelID) = (kind, codec, ssrc, profileLevelID)
        }
    }

    /// What was agreed for one section.
    package struct Chosen: Sendable, Equatable {
        package var kind: String
        package var mid: String
        package var payloadType: UInt8
        package var ssrc: UInt32
        /// Whether the viewer asked for NACK, PLI and FIR (`a=rtcp-fb`).
        package var nack: Bool
        package var pli: Bool
        package var fir: Bool
    }

    package let sdp: String
    package let chosen: [Chosen]
    package let remoteFingerprint: String
    package let dtlsRole: DtlsSession.Role

    package init(offer: SessionDescription, local: WebRtcAnswer.Local, sessionID: UInt64, sending: [Outgoing],
                 streamName: String) throws(WebRtcAnswer.Refusal) {
        let peer = try WebRtcOffer(offer)
        var chosen: [Chosen] = []
        var body: [String] = []
        var unfilled: [String] = []
        for m in offer.media {
            let (mid, inactive) = try peer.section(m)
            if let inactive {
                body += inactive
                continue
            }
            let receives = !(m.has("sendonly") || m.has("inactive"))
            guard receives, let out = sending.first(where: { $0.kind == m.kind }), !chosen.contains(where: { $0.kind == m.kind }),
                  let pt = Self.pick(m, out) else {
                if let out = sending.first(where: { $0.kind == m.kind }), !chosen.contains(where: { $0.kind == m.kind }), receives {
                    let offered = m.formats.compactMap { pt in m.codecs[pt].map { "\($0.name)/\($0.clockRate)" + (m.parameters[pt]?["profile-level-id"].map { " \($0)" } ?? "") } }
                    unfilled.append("section '\(mid)' offers \(offered.joined(separator: ", ")), not \(out.codec == "opus" ? "opus/48000/2" : "H.264 packetization-mode 1")")
                }
                body += Self.section(m, mid: mid, pt: nil, out: nil, local: local, setup: peer.answerSetup, stream: streamName)
                continue
            }
            let feedback = Set(m.attributes.filter { $0.name == "rtcp-fb" }.compactMap(\.value).filter { $0.hasPrefix("\(pt) ") }.map { String($0.dropFirst("\(pt) ".count)) })
            chosen.append(Chosen(kind: m.kind, mid: mid, payloadType: pt, ssrc: out.ssrc,
                                 nack: feedback.contains("nack"), pli: feedback.contains("nack pli"), fir: feedback.contains("ccm fir")))
            body += Self.section(m, mid: mid, pt: pt, out: out, local: local, setup: peer.answerSetup, stream: streamName)
        }
        guard !chosen.isEmpty else {
            throw .noCodec(unfilled.isEmpty ? "the offer receives nothing avgraph sends (it sends \(sending.map(\.kind).joined(separator: " and ")))"
                                            : "no codec in common: " + unfilled.joined(separator: "; "))
        }
        var lines = ["v=0", "o=avgraph \(sessionID) 2 IN IP4 127.0.0.1", "s=-", "t=0 0",
                     "a=group:BUNDLE \(offer.media.compactMap(\.mid).joined(separator: " "))", "a=ice-lite", "a=msid-semantic: WMS \(streamName)"]
        lines += body
        sdp = lines.joined(separator: "\r\n") + "\r\n"
        self.chosen = chosen
        remoteFingerprint = peer.fingerprint
        dtlsRole = peer.role
    }

    /// The offer's payload type for `out`: Opus at 48 kHz; H.264 in mode 1, the format whose
    /// profile matches the stream's (profile_idc, then constraint flags), else the first mode-1
    /// format (every H.264 decoder browsers use takes the profiles x264 and phones make).
    static func pick(_ m: MediaDescription, _ out: Outgoing) -> UInt8? {
        let formats = m.formats.filter { pt in
            guard let c = m.codecs[pt] else { return false }
            if out.codec == "opus" { return c.name == "opus" && c.clockRate == 48000 }
            return c.name == "h264" && c.clockRate == 90000 && (m.parameters[pt]?["packetization-mode"] ?? "0") == "1"
        }
        guard out.codec == "h264", let ours = out.profileLevelID?.lowercased(), ours.count == 6 else { return formats.first }
        func profile(_ pt: UInt8) -> String? { m.parameters[pt]?["profile-level-id"]?.lowercased() }
        if let exact = formats.first(where: { profile($0)?.prefix(4) == ours.prefix(4) }) { return exact }
        if let sameIdc = formats.first(where: { profile($0)?.prefix(2) == ours.prefix(2) }) { return sameIdc }
        return formats.first
    }

    private static func section(_ m: MediaDescription, mid: String, pt: UInt8?, out: Outgoing?, local: WebRtcAnswer.Local, setup: String, stream: String) -> [String] {
        let port = local.candidates.first?.port ?? 9
        guard let pt, let out else {
            // A dynamic payload type needs its rtpmap even in a section that carries nothing (RFC 8866).
            let any = m.formats.first
            let rtpmap = any.flatMap { pt in m.attributes.first { $0.name == "rtpmap" && $0.value?.hasPrefix("\(pt) ") == true }?.value }
            return ["m=\(m.kind) 0 \(m.proto) \(any.map(String.init) ?? "0")", "c=IN IP4 0.0.0.0", "a=mid:\(mid)", "a=inactive", "a=rtcp-mux",
                    "a=ice-ufrag:\(local.ufrag)", "a=ice-pwd:\(local.password)", "a=fingerprint:sha-256 \(local.fingerprint)", "a=setup:\(setup)"]
                + (rtpmap.map { ["a=rtpmap:\($0)"] } ?? [])
        }
        var lines = ["m=\(m.kind) \(port) \(m.proto) \(pt)", "c=IN IP4 0.0.0.0", "a=mid:\(mid)", "a=sendonly", "a=rtcp-mux",
                     "a=ice-ufrag:\(local.ufrag)", "a=ice-pwd:\(local.password)", "a=fingerprint:sha-256 \(local.fingerprint)", "a=setup:\(setup)",
                     "a=msid:\(stream) \(stream)-\(m.kind)"]
        if out.codec == "opus" {
            lines.append("a=rtpmap:\(pt) opus/48000/2")
            lines.append("a=fmtp:\(pt) minptime=10;useinbandfec=1")
        } else {
            lines.append("a=rtpmap:\(pt) H264/90000")
            let offered = m.parameters[pt]?["profile-level-id"] ?? out.profileLevelID ?? "42e01f"
            lines.append("a=fmtp:\(pt) level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=\(offered)")
        }
        let offered = m.attributes.filter { $0.name == "rtcp-fb" }.compactMap(\.value).filter { $0.hasPrefix("\(pt) ") }
        for fb in ["nack", "nack pli", "ccm fir"] where offered.contains("\(pt) \(fb)") { lines.append("a=rtcp-fb:\(pt) \(fb)") }
        lines.append("a=ssrc:\(out.ssrc) cname:avgraph")
        lines.append("a=ssrc:\(out.ssrc) msid:\(stream) \(stream)-\(m.kind)")
        for (i, c) in local.candidates.enumerated() {
            lines.append("a=candidate:\(i + 1) 1 udp \(2_130_706_431 - i) \(c.address) \(c.port) typ host")
        }
        lines.append("a=end-of-candidates")
        return lines
    }
}
