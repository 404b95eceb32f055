import AVGraph
import AVGraphTransport
import Foundation

/// `whip` as a source: a phone, a browser or OBS publishes over WebRTC (WHIP, RFC 9725) to
/// avgraph's own endpoint: `POST http://HOST:PORT/whip/KEY` with an SDP offer, media on one UDP
/// port. Same outputs, clock, reconnect, `idle`, `away` and events as the `rtmp` and `srt`
/// sources; H.264 goes on to `h264 passthrough: auto` as an RTMP phone's does.
public final class WhipSourceNode: Source, Node, LiveSource {
    public static let typeName = "whip"
    public static let summary = "receives a live WebRTC stream published over WHIP (avgraph as the endpoint) and decodes it"
    public static let outputs = NetworkSourceOptions.outputs
    static let url = Setting<String?>.string("url", required: true,
        doc: "whip://HOST:PORT: the HTTP endpoint to listen on (0.0.0.0 for every interface); publishers POST their offer to http://HOST:PORT/whip/KEY. whips://HOST:PORT: the same over HTTPS, with cert and key")
    static let udpPort = Setting<Int?>.int("webrtc-udp", 0...65535,
        doc: "the UDP port every session's media comes to (unset: the same number as the HTTP port; 0: any free port); open it in a firewall, forward it behind NAT")
    static let advertise = Setting<String?>.string("webrtc-host",
        doc: "comma-separated addresses (or names, resolved at start), each HOST or HOST:PORT, to give publishers as where to send media: a server behind NAT gives its public address (and the public port a forward maps to webrtc-udp); unset: the listen address, or with 0.0.0.0 127.0.0.1 and this machine's IPv4 addresses")
    static let handshakeTimeout = Setting.duration("handshake-timeout", 1...60, default: "10s",
        doc: "an offer whose publisher has not connected (ICE and DTLS) within this long is released")
    public static let options = [url.spec, NetworkSourceOptions.idle.spec, NetworkSourceOptions.timeout.spec, NetworkSourceOptions.size.spec,
                                 IngestOptions.rate.spec, IngestOptions.audioRate.spec, IngestOptions.audioChannels.spec,
                                 NetworkSourceOptions.buffer.spec, IngestOptions.audioBuffer.spec, NetworkSourceOptions.backlog.spec,
                                 AwaySettings.away.spec, udpPort.spec, advertise.spec, ListenOptions.keys.spec, ListenOptions.keysFile.spec,
                                 handshakeTimeout.spec, ListenOptions.maxSize.spec, certificate.spec, privateKey.spec]
    static let certificate = Setting<String?>.path("cert", mustExist: true,
        doc: "with a whips:// url: the endpoint's TLS certificate, a PEM file (the chain after it)")
    static let privateKey = Setting<String?>.path("key", mustExist: true,
        doc: "with a whips:// url: the TLS private key of cert, a PEM file without a passphrase")
    public static let events: [any NodeEvent.Type] = NetworkSourceCore.events

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let url = n[Self.url] ?? ""
        guard Self.parts(url) != nil else {
            throw NegotiationError("'\(NetworkSourceOptions.redacted(url))' is not a WHIP endpoint address", option: "url",
                                   hint: "write it like whip://0.0.0.0:8080 (publishers then POST to http://HOST:8080/whip/KEY)")
        }
        let certificate = n.path(Self.certificate), key = n.path(Self.privateKey)
        if url.hasPrefix("whips://") {
            guard let certificate, let key else {
                throw NegotiationError("a whips:// endpoint takes a TLS certificate and its key", option: "url", hint: "give cert: FILE and key: FILE (PEM)")
            }
            do { _ = try ListenTLS.checkedContext(certificate: certificate, key: key) } catch { throw NegotiationError(error.description, option: error.option) }
        } else if certificate != nil || key != nil {
            throw NegotiationError("cert and key are for a whips:// url", option: certificate != nil ? "cert" : "key", hint: "write the url like whips://0.0.0.0:8443")
        }
        return try NetworkSourceOptions.negotiate(n)
    }

    static func parts(_ url: String) -> (host: String, port: Int)? {
        guard url.hasPrefix("whip://") || url.hasPrefix("whips://"), let c = URLComponents(string: url), let host = c.host, let port = c.port, (1...65535).contains(port),
              c.path.isEmpty || c.path == "/" else { return nil }
        return (host, port)
    }

    private let core: NetworkSourceCore

    public init(_ setup: NodeSetup) throws {
        let url = setup[Self.url] ?? ""
        guard let (host, port) = Self.parts(url) else { throw MediaError("'\(url)' is not a WHIP endpoint address") }
        let timeout = setup[NetworkSourceOptions.timeout]
        var input = NetworkInput(url: url, format: WebRtcMediaFraming.format, options: [:], listen: true, timeout: timeout)
        input.maxSize = setup[ListenOptions.maxSize]
        let keys = try PublisherKeys(keys: setup[ListenOptions.keys], file: setup.path(ListenOptions.keysFile), urlKey: nil)
        var settings = WhipListener.Settings(host: host, httpPort: port, udpPort: setup[Self.udpPort] ?? port)
        settings.advertise = (setup[Self.advertise] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        settings.keys = keys.isEmpty && setup.path(ListenOptions.keysFile) == nil ? nil : keys
        settings.handshakeTimeout = setup[Self.handshakeTimeout]
        settings.silence = timeout
        if url.hasPrefix("whips://"), let certificate = setup.path(Self.certificate), let key = setup.path(Self.privateKey) {
            settings.tls = (certificate, key)
        }
        input.listener = try WhipListener(settings)
        core = NetworkSourceCore(setup, input: input)
    }

    override public func produce(_ out: Outlet) throws -> Bool { try core.produce(out) }
    override public var mediaTimeSlack: Double { NetworkSourceCore.mediaTimeSlack }
    override public func finish(_ out: Outlet) throws { try core.finish(out) }
    override public func abort() { core.abort() }
}
