/// What every answer avgraph gives (WHIP's receiving one, WHEP's sending one) reads of an offer
/// before it picks codecs: the peer's ICE credentials and SHA-256 fingerprint, avgraph's DTLS
/// role (the client only when the offer made itself the server, `a=setup:passive`), and each
/// section checked as avgraph takes them: a `mid` in BUNDLE, DTLS-SRTP over UDP, rtcp-mux.
struct WebRtcOffer {
    let ufrag: String
    let password: String
    /// The fingerprint's hex, without its `sha-256 ` prefix.
    let fingerprint: String
    let role: DtlsSession.Role
    let bundle: [String]

    init(_ offer: SessionDescription) throws(WebRtcAnswer.Refusal) {
        guard let first = offer.media.first(where: { $0.kind == "audio" || $0.kind == "video" }) else {
            throw .malformed("the offer has no audio or video section")
        }
        guard let ufrag = offer.attribute("ice-ufrag", in: first), let pwd = offer.attribute("ice-pwd", in: first) else {
            throw .malformed("the offer has no a=ice-ufrag/a=ice-pwd")
        }
        guard let fingerprint = offer.attribute("fingerprint", in: first), fingerprint.lowercased().hasPrefix("sha-256 ") else {
            throw .malformed("the offer has no a=fingerprint:sha-256")
        }
        let setup = offer.attribute("setup", in: first) ?? "actpass"
        guard ["actpass", "active", "passive"].contains(setup) else { throw .malformed("a=setup:\(setup) is not actpass, active or passive") }
        self.ufrag = ufrag
        password = pwd
        self.fingerprint = String(fingerprint.dropFirst("sha-256 ".count))
        role = setup == "passive" ? .client : .server
        bundle = offer.bundle
    }

    /// The `a=setup` of avgraph's answer.
    var answerSetup: String { role == .server ? "passive" : "active" }

    /// A section's `mid`, checked; `inactive` holds the answer's lines for a section that is
    /// neither audio nor video (a data channel), which avgraph declines.
    func section(_ m: MediaDescription) throws(WebRtcAnswer.Refusal) -> (mid: String, inactive: [String]?) {
        guard let mid = m.mid else { throw .malformed("a media section without a=mid") }
        guard bundle.contains(mid) else { throw .malformed("media section '\(mid)' is not in a=group:BUNDLE (avgraph takes BUNDLE only)") }
        guard m.kind == "audio" || m.kind == "video" else { return (mid, ["m=\(m.kind) 0 \(m.proto)", "c=IN IP4 0.0.0.0", "a=mid:\(mid)", "a=inactive"]) }
        guard m.proto == "UDP/TLS/RTP/SAVPF" || m.proto == "UDP/TLS/RTP/SAVP" else { throw .malformed("media section '\(mid)': \(m.proto) is not DTLS-SRTP over UDP") }
        guard m.has("rtcp-mux") else { throw .malformed("media section '\(mid)' has no a=rtcp-mux (avgraph takes rtcp-mux only)") }
        return (mid, nil)
    }
}
