import AVGraph
import Foundation

/// Media pushed by Swift code in the same process (a broadcast extension's sample handler):
/// `LivePipeline.appSource(named:)` hands out the `AppSource` that pushes into this node.
/// Pushing never waits: the buffer is copied once into a pooled frame and queued, or dropped
/// by the `drop` policy when the queue is full. Media is stamped on the pipeline clock.
public final class AppSourceNode: Source, Node, LiveSource {
    public static let typeName = "app"
    public static let summary = "media pushed by Swift code in the same process (LivePipeline.appSource(named:))"
    public static let outputs = [
        PadSpec("video", [.rawVideo], doc: "pushed pictures (NV12 or BGRA, their own size, orientation tag), pts in µs"),
        PadSpec("audio", [.rawAudio], doc: "pushed app audio, at audio-rate/audio-channels"),
        PadSpec("mic", [.rawAudio], doc: "pushed microphone audio, at audio-rate/audio-channels"),
    ]
    static let drop = IngestOptions.drop(default: .newest)
    public static let options = IngestOptions.common(drop: drop)

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { try IngestOptions.negotiate(n) }

    let hub: IngestHub
    let emitter: IngestEmitter
    let duration: Double?

    public init(_ setup: NodeSetup) throws {
        hub = IngestOptions.hub(setup, drop: Self.drop)
        emitter = IngestEmitter(hub: hub, outputs: setup.outputs)
        duration = setup.duration
    }

    override public func produce(_ out: Outlet) throws -> Bool {
        if let duration, out.clock >= duration { return false }
        switch emitter.next(out, duration: duration) {
        case .item(let item): try emitter.emit(item, out)
        case .woken, .deadline:
            try emitter.idle(out)
            if hub.producerAway { try emitter.producerLeft(out) }
        case .ended: return false
        }
        return !out.reachedEnd
    }

    override public func finish(_ out: Outlet) throws {
        hub.finish()
        try emitter.finish(out)
    }

    override public func abort() { hub.finish() }
}
