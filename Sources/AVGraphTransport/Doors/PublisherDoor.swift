import AVGraph
import Foundation

/// One listener of `avgraph serve` (`rtmp://`, `rtmps://`, `srt://`, `srtla://` or `whip://`), taking any number of
/// publishers at once. With a keys file the listener itself refuses an unknown key (in the
/// protocol: RTMP's BadName, SRT's reject reason); without one it admits every key and `serve`
/// asks its backend (`--auth`) or admits all (`--open`).
public final class PublisherDoor: Sendable {
    public let url: String
    /// `rtmp`, `rtmps`, `srt`, `srtla` or `whip`, as hooks and the backend name it.
    public let scheme: String
    private let handoff: PublisherHandoff

    /// WHIP's media: the UDP port (nil: the HTTP port's number) and the addresses to advertise.
    public struct WebRtc: Sendable {
        public var udpPort: Int?
        public var hosts: [String]
        public init(udpPort: Int? = nil, hosts: [String] = []) {
            self.udpPort = udpPort
            self.hosts = hosts
        }
    }

    public init(url: String, keysFile: String?, certificate: String?, privateKey: String?, passphrase: String? = nil, webrtc: WebRtc = .init()) throws {
        self.url = url
        guard let c = URLComponents(string: url), let scheme = c.scheme, let host = c.host else {
            throw MediaError("--listen \(url): write it like rtmp://0.0.0.0:1935, rtmps://0.0.0.0:1936, srt://0.0.0.0:9000, srtla://0.0.0.0:5000 or whip://0.0.0.0:8080")
        }
        self.scheme = scheme
        let keys = try keysFile.map { try PublisherKeys(keys: [], file: $0, environment: [:], urlKey: nil) }
        switch scheme {
        case "rtmp", "rtmps":
            var tls: RtmpListener.TLSFiles?
            if scheme == "rtmps" {
                guard let certificate, let privateKey else { throw MediaError("--listen \(url): rtmps:// takes --cert and --key") }
                tls = .init(certificate: certificate, key: privateKey)
            }
            let none = try PublisherKeys(keys: [], file: nil, environment: [:], urlKey: nil)
            var policy = RtmpPolicy(app: "", keys: keys ?? none)
            policy.anyApp = true
            policy.anyKey = keys == nil
            handoff = try RtmpListener(host: host, port: c.port ?? (scheme == "rtmps" ? 443 : 1935), policy: policy,
                                       limits: .init(concurrent: true), tls: tls)
        case "srt":
            guard let port = c.port else { throw MediaError("--listen \(url): srt:// needs a port, like srt://0.0.0.0:9000") }
            handoff = try SrtListener(.init(host: host, port: port, passphrase: passphrase, latency: 0.12, keys: keys, concurrent: true))
        case "srtla":
            guard let port = c.port else { throw MediaError("--listen \(url): srtla:// needs a port, like srtla://0.0.0.0:5000") }
            let srt = SrtListener.Settings(host: host, port: port, passphrase: passphrase, latency: 2, keys: keys, concurrent: true)
            handoff = try SrtlaListener(.init(host: host, port: port), srt: SrtlaListener.bondedSrt(srt))
        case "whip", "whips":
            guard let port = c.port else { throw MediaError("--listen \(url): \(scheme):// needs a port, like \(scheme)://0.0.0.0:8080") }
            var settings = WhipListener.Settings(host: host, httpPort: port, udpPort: webrtc.udpPort ?? port)
            settings.advertise = webrtc.hosts
            settings.keys = keys
            settings.concurrent = true
            if scheme == "whips" {
                guard let certificate, let privateKey else { throw MediaError("--listen \(url): whips:// takes --cert and --key") }
                settings.tls = (certificate, privateKey)
            }
            handoff = try WhipListener(settings)
        default:
            throw MediaError("--listen \(url): serve listens on rtmp://, rtmps://, srt://, srtla://, whip:// or whips://, not \(scheme)://")
        }
    }

    public func start() { handoff.start() }
    /// No more publishers; every connection ends.
    public func stop() { handoff.stop() }

    /// The next admitted publisher, waiting for one; nil once stopped.
    public func next() -> PublisherArrival? { handoff.next().map { PublisherArrival(stream: $0, scheme: scheme) } }

    /// Refused connections since the last call, each naming its peer (never a key).
    public func takeNotes() -> [String] { handoff.takeNotes() }

    /// A bonded sender's links joining and leaving (`srtla://`), since the last call.
    public func takeLinkChanges() -> [String] {
        (handoff as? SrtlaListener)?.takeReports().compactMap { r in r.change.map { "srtla group \(r.group): \($0); links: \(SrtlaListener.describe(r.links))" } } ?? []
    }
}

/// One admitted publisher: who, what it asked for, and its bytes as it sent them (FLV from
/// RTMP, MPEG-TS from SRT; WHIP's depacketized media as `WebRtcMediaFraming` records).
public struct PublisherArrival: Sendable {
    package let stream: PublisherStream
    public let scheme: String
    public var peer: String { stream.peer }
    /// RTMP: the published name without its `?query`; SRT: the stream id's resource.
    public var key: String { String(stream.key.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "") }
    /// RTMP's published name after `?` (tokens a phone app appends), empty without.
    public var query: String { stream.key.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init) ?? "" }
    public var app: String { stream.app }
    public var format: String { stream.format ?? "flv" }

    /// Up to `buffer.count` bytes without waiting: nil when none has come yet, 0 at the end.
    public func readNow(into buffer: UnsafeMutableRawBufferPointer) -> Int? { stream.readNow(into: buffer) }
    /// Calls `notify` (on the listener's thread: schedule the reading, do not read there) whenever
    /// bytes or the end arrive, and once now; nil stops it.
    public func whenReadable(_ notify: (@Sendable () -> Void)?) { stream.whenReadable(notify) }
    /// Closes the publisher's connection (refused, or its run is gone).
    public func abandon() { stream.abandon() }
}
