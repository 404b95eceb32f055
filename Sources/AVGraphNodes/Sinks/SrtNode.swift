import AVGraph
import AVGraphTransport
import Foundation

/// `srt`: like `rtmp`, but MPEG-TS over SRT (a libsrt caller socket of our own, `SrtCaller`),
/// for links where SRT's retransmission copes better with loss than RTMP over TCP. Same buffer,
/// drop policy, reconnect and events as `rtmp`.
public final class SrtNode: Sink, Node {
    public static let typeName = "srt"
    public static let summary = "pushes encoded video and audio live over SRT (MPEG-TS); reconnects by itself"
    public static let inputs = [PadSpec("in", [.encodedVideo, .encodedAudio], variadic: true,
                                        doc: "one encoded video stream and/or one encoded audio stream")]
    static let url = Setting<String?>.string("url", required: true,
                                             doc: "the SRT listener to call: srt://HOST:PORT, options as ffmpeg writes them, e.g. ?latency=200000 (µs)&passphrase=...&pbkeylen=16&streamid=...; an unknown option is an error")
    public static let options = LiveSinkOptions.common(url: url)
    public static let events: [any NodeEvent.Type] = LiveSinkCore.events

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let url = n[Self.url] ?? ""
        guard url.hasPrefix("srt://") else {
            throw NegotiationError("'\(Redaction.url(url))' is not an SRT address", option: "url", hint: "write it like srt://127.0.0.1:9000")
        }
        do { _ = try SrtCallerURL(url, defaults: Self.protocolOptions) } catch {
            throw NegotiationError("\(error)", option: "url", hint: "SRT options as ffmpeg's srt:// URLs take them (docs/RESTREAM.md)")
        }
        try LiveSinkOptions.checkInputs(n, container: "mpegts", what: "an SRT stream (MPEG-TS)")
        return []
    }

    /// libsrt in live mode throws away what it has not sent when the socket closes (linger 0):
    /// the last tenth of a second of every stream. A second of linger lets it go out (a URL's
    /// own `linger` wins).
    static let protocolOptions = ["linger": "1"]

    private let live: LiveSinkCore

    public init(_ setup: NodeSetup) throws {
        live = LiveSinkCore(setup, url: Self.url, format: "mpegts", muxerOptions: [:], protocolOptions: Self.protocolOptions)
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { try live.receive(buffer, input: input, out) }
    override public func tick(_ out: Outlet) throws { try live.tick(out) }
    override public func inputEnded(_ input: Int, _ out: Outlet) throws { live.inputEnded(input) }
    override public func finish(_ out: Outlet) throws { try live.finish(out) }
    override public func abort() { live.abort() }
}
