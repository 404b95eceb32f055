import ArgumentParser
import AVGraph
import AVGraphNodes
import Foundation
#if canImport(Glibc)
import Glibc
#endif

struct CtlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Steer a running pipeline over its control socket.",
        discussion: """
        Commands: set NODE.OPTION VALUE [--at MEDIA_TIME] | get NODE.OPTION | pause | resume | stop [--reason TEXT] |
        stats | watch | clip save PATH | graph (Graphviz DOT with live rates, queues and drops per edge)
        PIPELINE is the pipeline's name (its socket is found in the default place) or a socket path.
        """
    )

    @Argument(help: "The pipeline's name or its control socket path.")
    var pipeline: String

    @Argument(help: "The command and its arguments.")
    var command: [String]

    @Option(name: .long, help: "Why (with stop).")
    var reason: String?

    @Option(name: .long, help: ArgumentHelp("With set: apply at this media time (e.g. 12.5s): from the first frame at or after it.", valueName: "MEDIA_TIME"))
    var at: String?

    func request() throws -> ControlRequest {
        guard let verb = command.first else { throw ValidationError("give a command: \(Self.commands.joined(separator: ", "))") }
        let args = Array(command.dropFirst())
        func nodeOption(_ s: String) throws -> (String, String) {
            guard let dot = s.firstIndex(of: "."), dot != s.startIndex, s.index(after: dot) != s.endIndex else {
                throw ValidationError("expected NODE.OPTION, got '\(s)'")
            }
            return (String(s[..<dot]), String(s[s.index(after: dot)...]))
        }
        switch verb {
        case "set":
            guard args.count == 2 else { throw ValidationError("usage: ctl PIPELINE set NODE.OPTION VALUE") }
            let (n, o) = try nodeOption(args[0])
            var seconds: Double?
            if let at {
                guard let t = ValueSyntax.duration(at) ?? Double(at), t >= 0 else { throw ValidationError("--at takes a media time like 12.5s, got '\(at)'") }
                seconds = t
            }
            return .set(.init(node: n, option: o, value: .string(args[1]), at: seconds))
        case "get":
            guard args.count == 1 else { throw ValidationError("usage: ctl PIPELINE get NODE.OPTION") }
            let (n, o) = try nodeOption(args[0])
            return .get(.init(node: n, option: o))
        case "pause", "resume", "stats", "watch", "graph":
            guard args.isEmpty else { throw ValidationError("'\(verb)' takes no arguments") }
            return [.pause, .resume, .stats, .watch, .graph].first { $0.command == verb }!
        case "stop":
            return .stop(reason: reason)
        case ClipSave.command:
            guard args.count == 2, args[0] == ClipSave.action else { throw ValidationError("usage: ctl PIPELINE clip save PATH") }
            let path = args[1].hasPrefix("/") ? args[1] : FileManager.default.currentDirectoryPath + "/" + args[1]
            return ClipSave(path: path).request
        default:
            throw ValidationError("unknown command '\(verb)'" + (Suggest.hint(for: verb, in: Self.commands).map { "; \($0)" } ?? ""))
        }
    }

    static let commands = ControlRequest.builtIn + ClipsNode.controlCommands.map(\.name)

    func validate() throws { _ = try request() }

    func run() throws {
        let req = try request()
        let path = pipeline.contains("/") || pipeline.hasSuffix(".sock") ? pipeline : ControlServer.defaultPath(for: pipeline)
        let fd = try connectTo(path)
        defer { close(fd) }
        let data = ControlEnvelope(req).line + Data([10])
        _ = data.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var pending = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        var first = true
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            pending += chunk[0..<n]
            while let nl = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeSubrange(...nl)
                if first {
                    first = false
                    try printReply(line, to: req)
                    if req != .watch { return }
                    continue
                }
                print(line)
                fflush(nil)
            }
        }
        if first {
            Terminal.err("error: the pipeline closed the connection without answering")
            throw ExitCode(1)
        }
    }

    /// The first line back: an error exits 1; `graph` prints as DOT, `watch`'s is not shown
    /// (the events follow), anything else prints as it came.
    func printReply(_ line: String, to req: ControlRequest) throws {
        let status = try? ControlAnswer<EmptyReply>.decode(line: Data(line.utf8))
        guard status?.ok == true else {
            Terminal.err("error: \(status?.error ?? line)")
            throw ExitCode(1)
        }
        if req == .graph {
            guard let graph = try? ControlAnswer<PipelineGraph>.decode(line: Data(line.utf8)).body else {
                Terminal.err("error: the graph reply does not read as a graph: \(line)")
                throw ExitCode(1)
            }
            print(GraphDot.render(graph), terminator: "")
        } else if req != .watch {
            print(line)
        }
    }

    /// Only a socket of this user, served by a process of this user: a socket someone else bound
    /// at the path first is refused, naming them, before the request is sent.
    func connectTo(_ path: String) throws -> Int32 {
        do { return try PrivateSocket.connect(path: path) } catch {
            Terminal.err("error: cannot reach pipeline '\(pipeline)': \(error)")
            throw ExitCode(1)
        }
    }
}
