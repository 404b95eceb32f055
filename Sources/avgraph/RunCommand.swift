import ArgumentParser
import AVGraph
import Foundation

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Check a .pipe file, then run it.",
        discussion: """
        SIGINT/SIGTERM stop cleanly: encoders are flushed and files finalized.
        Exit status: 0 clean end, 1 invalid file or runtime error (naming the node), 2 usage error.
        """
    )

    enum EventFormat: String, ExpressibleByArgument { case json }

    @Argument(help: "The .pipe file to run.")
    var file: String

    @Option(name: .customLong("set"), help: "Override an option: NODE.OPTION=VALUE (repeatable).")
    var sets: [String] = []

    @OptionGroup var pluginOptions: PluginOptions

    @Option(name: .long, help: "Write events to stdout, one JSON object a line.")
    var events: EventFormat?

    @Option(name: .long, help: "Stop after this much media time (overrides the file's 'duration'), e.g. 10s.")
    var duration: String?

    @Flag(name: .long, help: "Pace sources at wall-clock speed.")
    var realtime = false

    @Flag(name: .long, help: "Run as fast as possible.")
    var offline = false

    func validate() throws {
        if realtime && offline { throw ValidationError("--realtime and --offline exclude each other") }
        if let duration, ValueSyntax.duration(duration) == nil {
            throw ValidationError("--duration takes a duration like 10s or 500ms, got '\(duration)'")
        }
    }

    func run() throws {
        var checker = Checker(registry: try pluginOptions.registry(), overrides: try parseOverrides(sets))
        checker.loadsFilePlugins = true  // running a file means trusting it; its plugins are checked for ownership and mode
        var checked = checker.check(path: file)
        if let duration, let d = ValueSyntax.duration(duration) { checked.settings.duration = d }
        var printer = DiagnosticPrinter()
        for d in checked.diagnostics { Terminal.err(printer.render(d, path: file)) }
        guard checked.isValid else {
            Terminal.err("\(file): not run: fix the errors above (avgraph check \(file))")
            throw ExitCode(1)
        }
        let log = EventLog(output: events == .json ? .json : .none)
        let mode: Bool? = realtime ? true : offline ? false : nil
        let run: PipelineRun
        do { run = try PipelineRun(checked, events: log, realtime: mode) } catch {
            log.emit("error", ["message": "\(error)"])
            Terminal.err("error: \(error)")
            throw ExitCode(1)
        }
        var control: ControlServer?
        do {
            control = try ControlServer(run: run, path: checked.settings.control ?? ControlServer.defaultPath(for: checked.settings.name))
        } catch {
            Terminal.err("warning: no control socket: \(error)")
        }
        defer { control?.close() }
        if let path = control?.path { run.onStart = { log.emit("control", ["socket": path]) } }
        let stopper = SignalStopper(run: run)
        stopper.install()
        let status = StatusLine(pipeline: checked, enabled: Terminal.isTTY && events == nil)
        run.onStats = { status.update($0) }
        do {
            try run.run()
            status.finish()
        } catch {
            status.finish()
            Terminal.err("error: \(error)")
            throw ExitCode(1)
        }
        if !Terminal.isTTY || events != nil { return }
        Terminal.err("done: \(checked.settings.name)")
    }
}

/// SIGINT/SIGTERM end the sources; the run drains and finalizes as at a natural end.
/// A second signal while stopping exits at once.
final class SignalStopper: @unchecked Sendable {
    let run: PipelineRun
    private var sources: [any DispatchSourceSignal] = []
    private var count = 0

    init(run: PipelineRun) { self.run = run }

    func install() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler { [self] in
                count += 1
                if count > 1 { Terminal.err("\nstopping now"); Foundation.exit(130) }
                if Terminal.isTTY { Terminal.err("\nstopping: flushing encoders and finalizing files (signal again to quit now)") }
                run.stop(reason: sig == SIGINT ? "SIGINT" : "SIGTERM")
            }
            s.resume()
            sources.append(s)
        }
    }
}

/// One line on the terminal, rewritten each second: media time, fps, bitrate, queues, drops, memory.
final class StatusLine: @unchecked Sendable {
    let enabled: Bool
    let encoders: [String]
    let videoEncoders: Set<String>
    private var last: (wall: Double, bytes: Int, frames: Int)?
    private var fps = 0.0, kbps = 0.0
    private var printed = false

    init(pipeline: CheckedPipeline, enabled: Bool) {
        self.enabled = enabled
        encoders = pipeline.nodes.filter { $0.outputs.contains { $0.kind.isEncoded } }.map(\.name)
        videoEncoders = Set(pipeline.nodes.filter { $0.outputs.contains { $0.kind == .encodedVideo } }.map(\.name))
    }

    func update(_ s: [String: Any]) {
        guard enabled, let nodes = s["nodes"] as? [[String: Any]] else { return }
        let wall = s["wall"] as? Double ?? 0
        var bytes = 0, frames = 0
        var queues: [String] = []
        for n in nodes {
            let name = n["node"] as? String ?? ""
            if encoders.contains(name) { bytes += (n["bytes"] as? [Int])?.reduce(0, +) ?? 0 }
            if videoEncoders.contains(name) { frames += (n["emitted"] as? [Int])?.reduce(0, +) ?? 0 }
            if let q = n["queue"] as? [Int], !q.isEmpty { queues.append(q.map(String.init).joined(separator: "+")) }
        }
        // Rates over at least half a second: the final snapshot right after the flush would be noise.
        if let last, wall - last.wall >= 0.5 {
            fps = Double(frames - last.frames) / (wall - last.wall)
            kbps = Double(bytes - last.bytes) * 8 / 1000 / (wall - last.wall)
            self.last = (wall, bytes, frames)
        } else if last == nil {
            last = (wall, bytes, frames)
        }
        let media = s["media_time"] as? Double ?? 0
        let rss = Double(s["rss"] as? Int ?? 0) / 1_048_576
        let line = String(format: "time %7.2fs | %5.1f fps | %7.0f kbit/s | queues %@ | drops %d | rss %.0f MB",
                          media, fps, kbps, queues.joined(separator: " "), s["dropped"] as? Int ?? 0, rss)
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
        printed = true
    }

    func finish() {
        if printed { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
