import AVGraph
import AVGraphTransport
import Foundation

/// `srt` as a source (no `in:`): MPEG-TS over SRT, avgraph as the listener a phone calls
/// (`listen: true`) or calling a listener (`listen: false`). Same outputs, clock, reconnect,
/// `idle` and events as the `rtmp` source.
public final class SrtSourceNode: Source, Node, LiveSource {
    public static let typeName = "srt"
    public static let summary = "receives a live MPEG-TS stream over SRT (as the listener, or calling one) and decodes it"
    public static let outputs = NetworkSourceOptions.outputs
    static let url = Setting<String?>.string("url", required: true,
        doc: "srt://HOST:PORT: with listen, where to accept the caller (0.0.0.0 for every interface); without, the listener to call")
    static let passphrase = Setting<String?>.string("passphrase", doc: "encrypt with this passphrase (10 to 79 characters); the peer needs the same")
    static let latency = Setting.duration("latency", 0.02...10, default: "120ms",
        doc: "SRT's receive latency: how long lost packets may be retransmitted before they count as lost")
    public static let options = [url.spec] + NetworkSourceOptions.common() + [passphrase.spec, latency.spec, ListenOptions.keys.spec, ListenOptions.keysFile.spec,
                                                                          ListenOptions.handshakeTimeout.spec, ListenOptions.maxSize.spec]
    public static let events: [any NodeEvent.Type] = NetworkSourceCore.events

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let url = n[Self.url] ?? ""
        guard url.hasPrefix("srt://") else {
            throw NegotiationError("'\(NetworkSourceOptions.redacted(url))' is not an SRT address", option: "url", hint: "write it like srt://0.0.0.0:9000")
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
        var options = ["mode": listen ? "listener" : "caller", "latency": String(Int64(setup[Self.latency] * 1e6))]
        if let p = setup[Self.passphrase] { options["passphrase"] = p }
        let url = setup[Self.url] ?? ""
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
            input.listener = try SrtListener(.init(host: host, port: port, passphrase: setup[Self.passphrase], latency: setup[Self.latency],
                                                   keys: keys.isEmpty && setup.path(ListenOptions.keysFile) == nil ? nil : keys,
                                                   handshakeTimeout: setup[ListenOptions.handshakeTimeout], silence: timeout))
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
