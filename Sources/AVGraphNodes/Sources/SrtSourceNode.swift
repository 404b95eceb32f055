import AVGraph
import AVGraphTransport
import Foundation

/// `srt` as a source (no `in:`): MPEG-TS over SRT, avgraph as the listener a phone calls
/// (`listen: true`, also bonded over several links: `srtla://`) or calling a listener
/// (`listen: false`). Same outputs, clock, reconnect, `idle` and events as the `rtmp` source.
public final class SrtSourceNode: Source, Node, LiveSource {
    public static let typeName = "srt"
    public static let summary = "receives a live MPEG-TS stream over SRT (as the listener, or calling one) and decodes it"
    public static let outputs = NetworkSourceOptions.outputs
    static let url = Setting<String?>.string("url", required: true,
        doc: "srt://HOST:PORT: with listen, where to accept the caller (0.0.0.0 for every interface); without, the listener to call. srtla://HOST:PORT (with listen): a sender bonding several links (SRTLA: Moblin, IRL Pro, BELABOX) registers them on this UDP port; its SRT stream is taken as from any caller")
    static let passphrase = Setting<String?>.string("passphrase", doc: "encrypt with this passphrase (10 to 79 characters); the peer needs the same")
    static let latency = Setting<Double?>.duration("latency", 0.02...10,
        doc: "SRT's receive latency: how long lost packets may be retransmitted before they count as lost (unset: 120ms; 2s for srtla://, whose links differ in delay by hundreds of milliseconds)")
    static let srtlaLatency = 2.0
    static let srtLatency = 0.12
    static let srtlaLinks = Setting.int("srtla-links", 1...64, default: 8, doc: "with srtla://: links one sender may bond; a further link's registration is refused (REG_ERR)")
    static let srtlaGroups = Setting.int("srtla-groups", 1...10000, default: 200, doc: "with srtla://: senders registered at once; a further one is refused (REG_ERR)")
    static let srtlaTimeout = Setting.duration("srtla-timeout", 1...120, default: "10s",
        doc: "with srtla://: a link silent this long is dropped (its sender's other links go on); a sender with none left is gone")
    public static let options = [url.spec] + NetworkSourceOptions.common() + [passphrase.spec, latency.spec, ListenOptions.keys.spec, ListenOptions.keysFile.spec,
                                                                          ListenOptions.handshakeTimeout.spec, ListenOptions.maxSize.spec,
                                                                          srtlaLinks.spec, srtlaGroups.spec, srtlaTimeout.spec]
    public static let events: [any NodeEvent.Type] = NetworkSourceCore.events + [SrtlaLinksEvent.self]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let url = n[Self.url] ?? ""
        guard url.hasPrefix("srt://") || url.hasPrefix("srtla://") else {
            throw NegotiationError("'\(NetworkSourceOptions.redacted(url))' is not an SRT address", option: "url", hint: "write it like srt://0.0.0.0:9000 (or srtla://0.0.0.0:5000 for bonded links)")
        }
        if url.hasPrefix("srtla://") && !n[NetworkSourceOptions.listen] {
            throw NegotiationError("srtla:// is a receiver: it takes listen: true", option: "url", hint: "to call an SRT listener, write srt://HOST:PORT")
        }
        if let p = n[Self.passphrase], !(10...79).contains(p.count) {
            throw NegotiationError("the passphrase must be 10 to 79 characters, not \(p.count)", option: "passphrase")
        }
        return try NetworkSourceOptions.negotiate(n)
    }

    private let core: NetworkSourceCore

    public init(_ setup: NodeSetup) throws {
        let listen = setup[NetworkSourceOptions.listen]
        // libsrt's options in FFmpeg 5.1: latency in microseconds; mode listener or caller.
        let url = setup[Self.url] ?? ""
        let bonded = url.hasPrefix("srtla://")
        let latency = setup[Self.latency] ?? (bonded ? Self.srtlaLatency : Self.srtLatency)
        var options = ["mode": listen ? "listener" : "caller", "latency": String(Int64(latency * 1e6))]
        if let p = setup[Self.passphrase] { options["passphrase"] = p }
        let timeout = setup[NetworkSourceOptions.timeout]
        var input = NetworkInput(url: url, format: "mpegts", options: options, listen: listen, timeout: timeout)
        input.maxSize = setup[ListenOptions.maxSize]
        if listen {
            // avgraph's own listener on libsrt: each caller's stream id checked, stops wake it.
            guard let c = URLComponents(string: url), let host = c.host, let port = c.port else {
                throw MediaError("'\(NetworkSourceOptions.redacted(url))' needs a host and a port to listen on")
            }
            // A stream id in the URL in the access-control form names its key with `r=`.
            let urlKey = Self.streamID(in: c).map { SrtStreamID($0).resource ?? $0 }
            let keys = try PublisherKeys(keys: setup[ListenOptions.keys], file: setup.path(ListenOptions.keysFile), urlKey: urlKey)
            let srt = SrtListener.Settings(host: host, port: port, passphrase: setup[Self.passphrase], latency: latency,
                                           keys: keys.isEmpty && setup.path(ListenOptions.keysFile) == nil ? nil : keys,
                                           handshakeTimeout: setup[ListenOptions.handshakeTimeout], silence: timeout)
            if bonded {
                var limits = SrtlaGroups<UdpPeer>.Limits()
                limits.linksPerGroup = setup[Self.srtlaLinks]
                limits.groups = setup[Self.srtlaGroups]
                limits.linkTimeout = setup[Self.srtlaTimeout]
                input.listener = try SrtlaListener(.init(host: host, port: port, limits: limits), srt: SrtlaListener.bondedSrt(srt))
            } else {
                input.listener = try SrtListener(srt)
            }
        }
        core = NetworkSourceCore(setup, input: input)
    }

    /// `?streamid=` of the URL. Written unescaped, an access-control id's `#` begins the URL's
    /// fragment: the fragment is the rest of the id then.
    static func streamID(in url: URLComponents) -> String? {
        guard let value = url.queryItems?.first(where: { $0.name == "streamid" })?.value else { return nil }
        if value.isEmpty, let rest = url.fragment, url.query?.hasSuffix("streamid=") == true { return "#" + rest }
        return value
    }

    override public func produce(_ out: Outlet) throws -> Bool { try core.produce(out) }
    override public var mediaTimeSlack: Double { NetworkSourceCore.mediaTimeSlack }
    override public func finish(_ out: Outlet) throws { try core.finish(out) }
    override public func abort() { core.abort() }
}
