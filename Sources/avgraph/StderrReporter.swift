import ArgumentParser
import AVGraph
import AVGraphNodes
import CFFmpeg
import Foundation
import Synchronization

/// `-q`, `-v`, `--log-level`: how much of a run stderr shows, for the run and per node (as GST_DEBUG).
struct LoggingOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "Only errors on stderr (and the final line when nothing was recorded).")
    var quiet = false

    @Flag(name: .shortAndLong, help: "More on stderr: -v the run's progress (info), -vv everything (debug).")
    var verbose: Int

    @Option(name: .customLong("log-level"), help: ArgumentHelp(
        "What stderr shows: error, warning (default), info or debug, for the run or one node (NODE=LEVEL); comma-separated or repeated, e.g. --log-level warning,mix=debug.",
        valueName: "LEVEL"))
    var levels: [String] = []

    /// The settings these flags ask for; `nodes` are the pipeline's node names (a NODE= must name one).
    func settings(nodes: [String]) throws -> LogSettings {
        var s = LogSettings()
        if quiet && verbose > 0 { throw ValidationError("-q and -v exclude each other") }
        if quiet { s.level = .error }
        if verbose > 0 { s.level = verbose > 1 ? .debug : .info }
        for part in levels.flatMap({ $0.split(separator: ",") }).map({ $0.trimmingCharacters(in: .whitespaces) }) where !part.isEmpty {
            let pieces = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard let level = LogSettings.level(named: pieces.last!) else {
                throw ValidationError("--log-level: '\(pieces.last!)' is not a level (error, warning, info, debug)")
            }
            if pieces.count == 1 { s.level = level; continue }
            guard nodes.contains(pieces[0]) else {
                throw ValidationError("--log-level: the pipeline has no node named '\(pieces[0])' (nodes: \(nodes.joined(separator: ", ")))")
            }
            s.perNode[pieces[0]] = level
        }
        return s
    }
}

struct LogSettings: Sendable {
    var level: Event.Severity = .warning
    var perNode: [String: Event.Severity] = [:]

    static func level(named name: String) -> Event.Severity? {
        switch name.lowercased() {
        case "error", "quiet": .error
        case "warning", "warn": .warning
        case "info": .info
        case "debug": .debug
        default: nil
        }
    }

    func shows(_ severity: Event.Severity, node: String?) -> Bool {
        severity <= (node.flatMap { perNode[$0] } ?? level)
    }

    /// FFmpeg's own level: as verbose as the most verbose node asks for (lines are filtered per node after).
    var ffmpegLevel: Int32 {
        switch ([level] + perNode.values).max()! {
        case .error: AV_LOG_ERROR
        case .warning: AV_LOG_WARNING
        case .info: AV_LOG_INFO
        case .debug: AV_LOG_DEBUG
        }
    }

    static func severity(ffmpeg level: Int32) -> Event.Severity {
        if level <= AV_LOG_ERROR { return .error }
        if level <= AV_LOG_WARNING { return .warning }
        if level <= AV_LOG_INFO { return .info }
        return .debug
    }
}

/// A run told on stderr: warnings and errors as `avgraph: warning: phone (socket): ...`, FFmpeg's
/// own lines tagged with the node whose thread logged them, more with `-v`; at the end one line
/// saying what each sink got. Reads the typed events (one listener), whatever stdout carries.
final class StderrReporter: Sendable {
    let settings: LogSettings
    let pipelineName: String
    /// Node name -> type name, for `name (type)` prefixes.
    let types: [String: String]
    private let tty = Terminal.isTTY
    private struct Seen {
        var listening: [String: String] = [:] // socket source -> its path
        var producerCame: Set<String> = []
        var eos: Event.EndOfStream?
        var eosWall = 0.0
        var printedError = false
    }
    private let seen = Mutex(Seen())

    init(settings: LogSettings, pipeline: CheckedPipeline) {
        self.settings = settings
        pipelineName = pipeline.settings.name
        types = Dictionary(pipeline.nodes.map { ($0.name, $0.type.typeName) }, uniquingKeysWith: { a, _ in a })
    }

    /// Listens to `log`, and routes FFmpeg's log here.
    func attach(_ log: EventLog) {
        log.onEvent { [self] in observe($0) }
        FFmpegLog.route(maxLevel: settings.ffmpegLevel) { [self] in ffmpeg($0) }
    }

    func label(_ node: String) -> String { types[node].map { "\(node) (\($0))" } ?? node }

    private func observe(_ event: Event) {
        seen.withLock { s in
            if let n = event.node, let l = event.kind.declared(ListeningEvent.self) { s.listening[n] = l.path }
            if let n = event.node, event.kind.declared(ProducerEvent.self)?.state == .connected { s.producerCame.insert(n) }
            switch event.kind {
            case .eos(let e): s.eos = e; s.eosWall = event.wall
            case .error: s.printedError = true
            default: break
            }
        }
        if case .eos = event.kind { return } // the final line says it
        guard settings.shows(event.severity, node: event.node) else { return }
        say(event.severity, node: event.node, event.text)
    }

    private func ffmpeg(_ line: FFmpegLog.Line) {
        // A helper thread is named after its node ("live-send"): the node is the longest known prefix.
        var node = line.node
        if let n = node, types[n] == nil {
            node = types.keys.filter { n.hasPrefix($0 + "-") }.max { $0.count < $1.count }
        }
        let severity = LogSettings.severity(ffmpeg: line.level)
        guard settings.shows(severity, node: node) else { return }
        say(severity, node: node, "ffmpeg: " + (line.component.map { "[\($0)] " } ?? "") + line.text)
    }

    /// One line on stderr; on a terminal it first clears the status line, which redraws itself.
    func say(_ severity: Event.Severity, node: String?, _ text: String) {
        var line = "avgraph: \(severity.name): "
        if let node { line += label(node) + ": " }
        line += text
        write(line)
    }

    /// StandardStreams writes one line at a time: lines from different threads never interleave.
    private func write(_ line: String) {
        StandardStreams.write((tty ? "\r\u{1B}[K" : "") + line + "\n", to: STDERR_FILENO)
    }

    /// After the run: the final line, and the exit status it calls for (`failed`: the run threw).
    /// 0 media was recorded; 1 the run failed; 3 it ended cleanly but no sink got any media.
    func finish(failed: Error?) -> Int32 {
        let (eos, listening, came, wall, errorShown) = seen.withLock { ($0.eos, $0.listening, $0.producerCame, $0.eosWall, $0.printedError) }
        if let failed, !errorShown { say(.error, node: nil, "\(failed)") }
        guard let eos else { return failed == nil ? 0 : 1 }
        let sinks = eos.sinks.map { s -> String in
            s.bytes == 0 ? "\(label(s.node)) got no media"
                : String(format: "%@ %@, %.2f s, %d frames", label(s.node), Self.bytes(s.bytes), s.mediaDuration, s.frames)
        }.joined(separator: "; ")
        let how = eos.reason == "end" ? "ended" : "stopped (\(eos.reason))"
        let nothing = !eos.sinks.isEmpty && eos.sinks.allSatisfy { $0.bytes == 0 }
        if failed != nil {
            write("avgraph: \(pipelineName) failed: \(sinks)")
            return 1
        }
        if nothing {
            // The wait as the user saw it: from the start of the run.
            let waits = listening.filter { !came.contains($0.key) }.sorted { $0.key < $1.key }.map {
                String(format: "%@ waited %.0f s for a producer on %@ and none came", label($0.key), wall, $0.value)
            }
            let why = waits.isEmpty ? "" : waits.joined(separator: "; ") + "; "
            write("avgraph: error: \(pipelineName) \(how) and wrote nothing: \(why)\(sinks)")
            return 3
        }
        if settings.level >= .warning {
            write("avgraph: \(pipelineName) \(how) after \(String(format: "%.2f", eos.mediaTime)) s of media: \(sinks)")
        }
        return 0
    }

    static func bytes(_ n: Int) -> String {
        n >= 10 << 20 ? "\(n >> 20) MB" : n >= 10 << 10 ? "\(n >> 10) KB" : "\(n) bytes"
    }
}
