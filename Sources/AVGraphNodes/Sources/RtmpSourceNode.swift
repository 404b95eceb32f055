import AVGraph
import Foundation

/// `rtmp` as a source (no `in:`): a phone's broadcast app (or OBS, ffmpeg) publishes to avgraph
/// (`listen: true`, avgraph is the server) or avgraph pulls a stream from an RTMP server
/// (`listen: false`). Decoded video and audio come out on the run's clock; a publisher that
/// drops and comes back on the same URL continues the same timeline. Events: `listening` or
/// `pulling`, `publisher` (connected / disconnected, with the peer's address), `idle`.
public final class RtmpSourceNode: Node, LiveSource, @unchecked Sendable {
    public static let typeName = "rtmp"
    public static let summary = "receives a live RTMP stream (avgraph as the server, or pulling from one) and decodes it"
    public static let outputs = NetworkSourceOptions.outputs
    static let url = Setting<String?>.string("url", required: true,
        doc: "rtmp://HOST:PORT/APP/STREAM: with listen, where to accept the publisher (0.0.0.0 for every interface); without, the stream to pull")
    public static let options = [url.spec] + NetworkSourceOptions.common()

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let url = n[Self.url] ?? ""
        guard url.hasPrefix("rtmp://") || (url.hasPrefix("rtmps://") && !n[NetworkSourceOptions.listen]) else {
            throw NegotiationError("'\(NetworkSourceOptions.redacted(url))' is not an RTMP address", option: "url",
                                   hint: "write it like rtmp://0.0.0.0:1935/live/phone")
        }
        return try NetworkSourceOptions.negotiate(n)
    }

    private let core: NetworkSourceCore

    public init(_ setup: NodeSetup) throws {
        let url = setup[Self.url] ?? ""
        let listen = setup[NetworkSourceOptions.listen]
        var options: [String: String] = [:]
        if listen { options["listen"] = "1" }
        core = NetworkSourceCore(setup, input: NetworkInput(url: url, format: "flv", options: options, listen: listen,
                                                            timeout: setup[NetworkSourceOptions.timeout],
                                                            tcpPort: URLComponents(string: url)?.port ?? 1935))
    }

    public func produce(_ out: Outlet) throws -> Bool { try core.produce(out) }
    public func finish(_ out: Outlet) throws { try core.finish(out) }
    public func abort() { core.abort() }
}
