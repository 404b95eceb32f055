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
        var checked = Checker(registry: try pluginOptions.registry(), overrides: try parseOverrides(sets)).check(path: file)
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
            let message = Redaction.text("\(error)")
            log.emit(.error(.init(message)))
            Terminal.err("error: \(message)")
            throw ExitCode(1)
        }
        var control: ControlServer?
        do {
            control = try ControlServer(run: run, path: checked.settings.control ?? ControlServer.defaultPath(for: checked.settings.name))
        } catch {
            // A `control:` path the file asks for is not silently dropped (it may name a file that is not a socket).
            if checked.settings.control != nil {
                Terminal.err("error: \(error)")
                throw ExitCode(1)
            }
            Terminal.err("warning: no control socket: \(error)")
        }
        defer { control?.close() }
        if let path = control?.path { run.onStart = { log.emit(.control(.init(socket: path))) } }
        let stopper = SignalStopper(run: run)
        stopper.install()
        let status = StatusLine(pipeline: checked, enabled: Terminal.isTTY && events == nil)
        log.onEvent { if case .stats(let s) = $0.kind { status.update(s, wall: $0.wall) } }
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

    func update(_ s: Event.Stats, wall: Double) {
        guard enabled else { return }
        var bytes = 0, frames = 0
        var queues: [String] = []
        for n in s.nodes {
            if encoders.contains(n.node) { bytes += n.bytes?.reduce(0, +) ?? 0 }
            if videoEncoders.contains(n.node) { frames += n.emitted?.reduce(0, +) ?? 0 }
            if !n.queue.isEmpty { queues.append(n.queue.map(String.init).joined(separator: "+")) }
        }
        // Rates over at least half a second: the final snapshot right after the flush would be noise.
        if let last, wall - last.wall >= 0.5 {
            fps = Double(frames - last.frames) / (wall - last.wall)
            kbps = Double(bytes - last.bytes) * 8 / 1000 / (wall - last.wall)
            self.last = (wall, bytes, frames)
        } else if last == nil {
            last = (wall, bytes, frames)
        }
        let rss = Double(s.rss) / 1_048_576
        let line = String(format: "time %7.2fs | %5.1f fps | %7.0f kbit/s | queues %@ | drops %d | rss %.0f MB",
                          s.mediaTime, fps, kbps, queues.joined(separator: " "), s.dropped, rss)
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
        printed = true
    }

    func finish() {
        if printed { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
