import AVGraph
import AVGraphTransport
import Foundation

/// Options of a network source about who may publish and how much it may send: the keys
/// (RTMP), the handshake bound, the largest pictures and rate.
enum ListenOptions {
    static let keys = Setting.secrets("keys",
        doc: "with listen: the keys a publisher may use (rtmp: `stream`, in the url's application, or `app/stream`; srt: the caller's streamid); with keys-file and $AVGRAPH_KEYS they replace the url's own key; never printed")
    static let keysFile = Setting<String?>.path("keys-file", mustExist: true,
        doc: "with listen: a file of stream keys, one a line (# comments), read again when it changes; never printed")
    static let handshakeTimeout = Setting.duration("handshake-timeout", 0.5...60, default: "5s",
        doc: "with listen: a connection that has not published with a valid key within this long is dropped")
    static let maxSize = Setting.size("max-size", default: "3840x2160",
        doc: "larger pictures are refused (the stream, with a warning) before they are decoded")
    static let maxRate = Setting.number("max-rate", 1...1000, default: 120,
        doc: "with listen: a publisher sending more pictures a second than this is refused")

    static let certificate = Setting<String?>.path("cert", mustExist: true,
        doc: "with listen and an rtmps:// url: the server's TLS certificate, a PEM file (the chain after it)")
    static let privateKey = Setting<String?>.path("key", mustExist: true,
        doc: "with listen and an rtmps:// url: the TLS private key of cert, a PEM file without a passphrase")

    static func rtmp() -> [OptionSpec] {
        [keys.spec, keysFile.spec, handshakeTimeout.spec, maxSize.spec, maxRate.spec, certificate.spec, privateKey.spec]
    }

    /// `rtmp://HOST:PORT/APP/STREAM` (or `rtmps://`) cut into its parts (STREAM may be empty);
    /// without a port, RTMP's 1935 or RTMPS's 443.
    static func rtmpParts(_ url: String) -> (host: String, port: Int, app: String, stream: String)? {
        guard let c = URLComponents(string: url), let host = c.host else { return nil }
        let segments = c.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        return (host, c.port ?? (c.scheme == "rtmps" ? 443 : 1935), segments.first ?? "", segments.dropFirst().joined(separator: "/"))
    }

    /// The keys of a listening RTMP source; refuses a setup where no key could admit anyone.
    static func publisherKeys(url: String, keys: [String], file: String?) throws -> PublisherKeys {
        let k = try PublisherKeys(keys: keys, file: file, urlKey: rtmpParts(url)?.stream)
        if k.isEmpty && file == nil {
            throw MediaError("no stream key admits a publisher: give keys, keys-file or $\(PublisherKeys.environment), or name the stream in the url (rtmp://HOST:PORT/APP/STREAM)")
        }
        return k
    }
}
