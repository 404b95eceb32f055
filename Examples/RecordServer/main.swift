// A plain NIO HTTP server that records one pipeline per request, through the async API, and
// shuts down gracefully: on SIGTERM (or SIGINT) it stops taking requests, stops every running
// pipeline the way `avgraph ctl stop` does and exits once each of their files is finalized.
//
//     swift run -c release RecordServer PIPE OUTDIR [--port N]
//
// PIPE is a `.pipe` file whose sink node is called `out` (a live one: realtime, no `duration`).
// `POST /recordings/NAME` starts a run of it writing OUTDIR/NAME.mp4 (NAME: 1-64 of A-Z a-z 0-9
// - _) and answers 202 at once; the run goes on after the answer, until shutdown. Prints
// `listening on 127.0.0.1:PORT` when ready, `finalized PATH` for each recording closed, and
// `shut down` at the end.
//
// The server and the pipelines are structured: the listener is a swift-service-lifecycle
// `Service` in a `ServiceGroup` that handles the signals; each connection is a child task of
// it, which after answering runs its pipeline as a `PipelineService`, so it sees the same
// graceful shutdown.
import AVGraph
import AVGraphNodes
import AVGraphService
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

final class RecordServer: Service {
    let pipe: String
    let outputFolder: String
    let port: Int
    /// The names recording now: a second request for one is refused rather than overwriting its file.
    let recording = Mutex(Set<String>())

    init(pipe: String, outputFolder: String, port: Int) {
        self.pipe = pipe
        self.outputFolder = outputFolder
        self.port = port
    }

    func run() async throws {
        let server = try await ServerBootstrap(group: NIOSingletons.posixEventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: channel)
                }
            }
        say("listening on 127.0.0.1:\(server.channel.localAddress?.port ?? port)")
        // Closing the listener ends the loop below; the group then waits for the pipelines,
        // which the same shutdown is stopping.
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await connection in connections {
                        group.addTask { await self.serve(connection) }
                    }
                }
            }
        } onGracefulShutdown: {
            server.channel.close(promise: nil)
        }
    }

    /// Answers one request, then runs the pipeline it started (if it started one) to its end.
    func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        var started: (live: LivePipeline, name: String, path: String)?
        do {
            try await connection.executeThenClose { inbound, outbound in
                var head: HTTPRequestHead?
                for try await part in inbound {
                    switch part {
                    case .head(let h): head = h
                    case .body: continue
                    case .end:
                        guard let head else { return }
                        let (status, text, run) = self.start(head)
                        started = run
                        var headers = HTTPHeaders([("content-type", "text/plain"), ("connection", "close")])
                        headers.add(name: "content-length", value: String(text.utf8.count))
                        try await outbound.write(.head(HTTPResponseHead(version: head.version, status: status, headers: headers)))
                        try await outbound.write(.body(.byteBuffer(ByteBuffer(string: text))))
                        try await outbound.write(.end(nil))
                        return
                    }
                }
            }
        } catch {
            // A client that went away before the answer: its pipeline (if started) still runs.
        }
        guard let started else { return }
        defer { _ = recording.withLock { $0.remove(started.name) } }
        do {
            try await PipelineService(started.live).run()
            say("finalized \(started.path)")
        } catch {
            FileHandle.standardError.write(Data("recording \(started.name) failed: \(error)\n".utf8))
        }
    }

    func start(_ head: HTTPRequestHead) -> (HTTPResponseStatus, String, (LivePipeline, String, String)?) {
        let parts = head.uri.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].isEmpty, parts[1] == "recordings" else { return (.notFound, "POST /recordings/NAME\n", nil) }
        guard head.method == .POST else { return (.methodNotAllowed, "POST /recordings/NAME\n", nil) }
        let name = String(parts[2])
        guard (1...64).contains(name.count), name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            return (.badRequest, "NAME is 1-64 of A-Z a-z 0-9 - _\n", nil)
        }
        guard recording.withLock({ $0.insert(name).inserted }) else { return (.conflict, "\(name) is recording already\n", nil) }
        let path = outputFolder + "/" + name + ".mp4"
        do {
            let live = try LivePipeline(path: pipe, overrides: ["out.path=\(path)"])
            return (.accepted, "recording \(path)\n", (live, name, path))
        } catch {
            _ = recording.withLock { $0.remove(name) }
            return (.internalServerError, "\(error)\n", nil)
        }
    }
}

/// One line to stdout, unbuffered: the test reads them while the server runs.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

var arguments = Array(CommandLine.arguments.dropFirst())
var port = 8080
if let i = arguments.firstIndex(of: "--port"), i + 1 < arguments.count, let p = Int(arguments[i + 1]) {
    port = p
    arguments.removeSubrange(i...i + 1)
}
guard arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: RecordServer PIPE OUTDIR [--port N]\n".utf8))
    exit(2)
}
let server = RecordServer(pipe: arguments[0], outputFolder: arguments[1], port: port)
let group = ServiceGroup(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: Logger(label: "RecordServer"))
do {
    try await group.run()
} catch {
    FileHandle.standardError.write(Data("RecordServer: \(error)\n".utf8))
    exit(1)
}
say("shut down")
