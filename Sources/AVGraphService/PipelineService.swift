import AVGraph
import AVGraphNodes
import ServiceLifecycle

/// A pipeline as a swift-service-lifecycle `Service`: `run()` runs it to its end, and a graceful
/// shutdown (SIGTERM through a `ServiceGroup`, or the shutdown of a service it runs inside) stops it
/// the way `avgraph ctl stop` does: sources end, encoders flush, and `run()` returns once the files
/// are finalized. A library of its own so that an app using `LivePipeline` alone does not build
/// swift-service-lifecycle and what it pulls in (swift-log, swift-async-algorithms, swift-collections).
public struct PipelineService: Service {
    public let pipeline: LivePipeline

    public init(_ pipeline: LivePipeline) { self.pipeline = pipeline }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await pipeline.run()
        } onGracefulShutdown: {
            pipeline.stop(reason: "shutdown")
        }
    }
}
