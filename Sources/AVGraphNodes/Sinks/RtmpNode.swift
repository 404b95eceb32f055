import AVGraph
import Foundation

/// `rtmp`: pushes one encoded video and one encoded audio stream live to an RTMP server (FLV
/// over RTMP, avgraph's own client: `RtmpLiveSession`). The network may stall or break: the node keeps at most `buffer` of
/// media, drops video to the next keyframe before it drops audio, reconnects by itself with
/// exponential backoff and starts each new session on a keyframe. Events: `disconnected`,
/// `reconnecting`, `reconnected`, `dropped`.
public final class RtmpNode: Sink, Node {
    public static let typeName = "rtmp"
    public static let summary = "pushes encoded video and audio live to an RTMP server; reconnects by itself"
    public static let inputs = [PadSpec("in", [.encodedVideo, .encodedAudio], variadic: true,
                                        doc: "one encoded video stream (H.264; HEVC as Enhanced RTMP) and/or one encoded audio stream (AAC)")]
    static let url = Setting<String?>.string("url", required: true, doc: "where to publish: rtmp://HOST[:PORT]/APP/STREAM (rtmps:// for TLS)")
    static let trust = Setting<String?>.path("ca", mustExist: true,
        doc: "rtmps:// only: PEM certificates to trust instead of the system's store (a server with a self-signed certificate); its name or address is still checked against the certificate")
    public static let options = LiveSinkOptions.common(url: url) + [trust.spec]
    /// What avgraph's RTMP client writes as FLV.
    static let codecs: Set<String> = ["h264", "hevc", "aac"]
    public static let events: [any NodeEvent.Type] = LiveSinkCore.events

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let url = n[Self.url] ?? ""
        guard url.hasPrefix("rtmp://") || url.hasPrefix("rtmps://") else {
            throw NegotiationError("'\(Redaction.url(url))' is not an RTMP address", option: "url", hint: "write it like rtmp://127.0.0.1:1935/live/stream")
        }
        if n.path(Self.trust) != nil && !url.hasPrefix("rtmps://") {
            throw NegotiationError("ca is for an rtmps:// url", option: "ca", hint: "publish to rtmps://, or leave ca out")
        }
        try LiveSinkOptions.checkInputs(n, container: "flv", what: "an RTMP stream (FLV)", codecs: codecs)
        return []
    }

    private let live: LiveSinkCore

    public init(_ setup: NodeSetup) throws {
        live = LiveSinkCore(setup, url: Self.url, format: "flv", muxerOptions: [:], session: .rtmp(trustedCertificates: setup.path(Self.trust)))
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { try live.receive(buffer, input: input, out) }
    override public func tick(_ out: Outlet) throws { try live.tick(out) }
    override public func inputEnded(_ input: Int, _ out: Outlet) throws { live.inputEnded(input) }
    override public func finish(_ out: Outlet) throws { try live.finish(out) }
    override public func abort() { live.abort() }
}
