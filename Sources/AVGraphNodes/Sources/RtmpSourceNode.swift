import AVGraph
import AVGraphTransport
import Foundation

/// `rtmp` as a source (no `in:`): a phone's broadcast app (or OBS, ffmpeg) publishes to avgraph
/// (`listen: true`, avgraph is the server) or avgraph pulls a stream from an RTMP server
/// (`listen: false`). Decoded video and audio come out on the run's clock; a publisher that
/// drops and comes back on the same URL continues the same timeline. Events: `listening` or
/// `pulling`, `publisher` (connected / disconnected, with the peer's address), `idle`.
public final class RtmpSourceNode: Source, Node, LiveSource {
    public static let typeName = "rtmp"
    public static let summary = "receives a live RTMP stream (avgraph as the server, or pulling from one) and decodes it"
    public static let outputs = NetworkSourceOptions.outputs
    static let url = Setting<String?>.string("url", required: true,
        doc: "rtmp://HOST:PORT/APP/STREAM: with listen, where to accept the publisher (0.0.0.0 for every interface; rtmps:// takes it over TLS, with cert and key); without, the stream to pull")
    public static let options = [url.spec] + NetworkSourceOptions.common() + ListenOptions.rtmp()
    public static let events: [any NodeEvent.Type] = NetworkSourceCore.events

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let url = n[Self.url] ?? ""
        let tls = url.hasPrefix("rtmps://")
        guard url.hasPrefix("rtmp://") || tls else {
            throw NegotiationError("'\(NetworkSourceOptions.redacted(url))' is not an RTMP address", option: "url",
                                   hint: "write it like rtmp://0.0.0.0:1935/live/phone")
        }
        try negotiateTLS(n, url: url)
        if n[NetworkSourceOptions.listen] {
            guard let parts = ListenOptions.rtmpParts(url), !parts.app.isEmpty else {
                throw NegotiationError("'\(NetworkSourceOptions.redacted(url))' names no application to listen on", option: "url",
                                       hint: "write it like rtmp://0.0.0.0:1935/live/phone")
            }
            if parts.stream.isEmpty && n[ListenOptions.keys].isEmpty && n.path(ListenOptions.keysFile) == nil
                && ProcessInfo.processInfo.environment[PublisherKeys.environment] == nil {
                throw NegotiationError("no stream key admits a publisher", option: "keys",
                                       hint: "give keys, keys-file or $\(PublisherKeys.environment), or name the stream in the url")
            }
        }
        return try NetworkSourceOptions.negotiate(n)
    }

    /// Listening on rtmps:// takes a certificate and its key, and they must make a TLS server
    /// (read here, so `check` finds a bad file); cert and key mean nothing anywhere else.
    private static func negotiateTLS(_ n: Negotiation, url: String) throws(NegotiationError) {
        let certificate = n.path(ListenOptions.certificate), key = n.path(ListenOptions.privateKey)
        guard n[NetworkSourceOptions.listen] && url.hasPrefix("rtmps://") else {
            guard certificate == nil && key == nil else {
                throw NegotiationError("cert and key are for listening on an rtmps:// url", option: certificate != nil ? "cert" : "key",
                                       hint: "with listen: true, write the url like rtmps://0.0.0.0:443/live")
            }
            return
        }
        guard let certificate, let key else {
            throw NegotiationError("listening on rtmps:// takes a TLS certificate and its key", option: "url",
                                   hint: "give cert: FILE and key: FILE (PEM)")
        }
        do { _ = try ListenTLS.checkedContext(certificate: certificate, key: key) } catch {
            throw NegotiationError(error.description, option: error.option)
        }
    }

    private let core: NetworkSourceCore

    public init(_ setup: NodeSetup) throws {
        let url = setup[Self.url] ?? ""
        let listen = setup[NetworkSourceOptions.listen]
        let timeout = setup[NetworkSourceOptions.timeout]
        var input = NetworkInput(url: url, format: "flv", options: [:], listen: listen, timeout: timeout)
        input.maxSize = setup[ListenOptions.maxSize]
        if listen {
            // avgraph's own server (not libavformat's single-connection listen): any number of
            // connections at once, each authenticated, the handshake bounded.
            guard let parts = ListenOptions.rtmpParts(url) else { throw MediaError("'\(NetworkSourceOptions.redacted(url))' is not an RTMP address") }
            let keys = try ListenOptions.publisherKeys(url: url, keys: setup[ListenOptions.keys], file: setup.path(ListenOptions.keysFile))
            var policy = RtmpPolicy(app: parts.app, keys: keys, maxWidth: input.maxSize.width, maxHeight: input.maxSize.height,
                                    maxRate: setup[ListenOptions.maxRate])
            let privacy = input.privacy
            policy.onData = { name, values, timestamp in
                if name == InBandPrivacy.messageName { InBandPrivacy.apply(values, timestamp: timestamp, to: privacy) }
            }
            var tls: RtmpListener.TLSFiles?
            if url.hasPrefix("rtmps://"), let certificate = setup.path(ListenOptions.certificate), let key = setup.path(ListenOptions.privateKey) {
                tls = .init(certificate: certificate, key: key)
            }
            input.listener = try RtmpListener(host: parts.host, port: parts.port, policy: policy,
                                              limits: .init(handshakeTimeout: setup[ListenOptions.handshakeTimeout], silence: timeout), tls: tls)
        }
        core = NetworkSourceCore(setup, input: input)
    }

    override public func produce(_ out: Outlet) throws -> Bool { try core.produce(out) }
    override public var mediaTimeSlack: Double { NetworkSourceCore.mediaTimeSlack }
    override public func finish(_ out: Outlet) throws { try core.finish(out) }
    override public func abort() { core.abort() }
}
