import AVGraph
import AVGraphTransport
import Foundation

/// `publisher` as a source: the stream `avgraph serve` admitted for this run (one publisher,
/// RTMP or SRT), relayed on standard input. A serve template's source. Same outputs, clock,
/// reconnect, `idle` and events as the `rtmp` and `srt` sources.
public final class PublisherSourceNode: Source, Node, LiveSource {
    public static let typeName = "publisher"
    public static let summary = "the live stream avgraph serve admitted for this run (RTMP or SRT), decoded"
    public static let outputs = NetworkSourceOptions.outputs
    /// Set by `avgraph serve` for the runs it starts: their standard input is the relay.
    public static let environment = "AVGRAPH_PUBLISHER_RELAY"
    public static let options = [NetworkSourceOptions.idle.spec, NetworkSourceOptions.timeout.spec, NetworkSourceOptions.size.spec,
                                 IngestOptions.rate.spec, IngestOptions.audioRate.spec, IngestOptions.audioChannels.spec,
                                 NetworkSourceOptions.buffer.spec, IngestOptions.audioBuffer.spec, NetworkSourceOptions.backlog.spec,
                                 ListenOptions.maxSize.spec, AwaySettings.away.spec]
    public static let events: [any NodeEvent.Type] = NetworkSourceCore.events

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { try NetworkSourceOptions.negotiate(n) }

    private let core: NetworkSourceCore

    public init(_ setup: NodeSetup) throws {
        guard ProcessInfo.processInfo.environment[Self.environment] == "stdin" else {
            throw MediaError("a publisher source takes its stream from avgraph serve: run this file with avgraph serve FILE --listen ...")
        }
        var input = NetworkInput(url: "publisher:", format: nil, options: [:], listen: true, timeout: setup[NetworkSourceOptions.timeout])
        input.maxSize = setup[ListenOptions.maxSize]
        input.privacyInTags = true
        input.listener = try PublisherRelay(fd: STDIN_FILENO)
        core = NetworkSourceCore(setup, input: input)
    }

    override public func produce(_ out: Outlet) throws -> Bool { try core.produce(out) }
    override public var mediaTimeSlack: Double { NetworkSourceCore.mediaTimeSlack }
    override public func finish(_ out: Outlet) throws { try core.finish(out) }
    override public func abort() { core.abort() }
}
