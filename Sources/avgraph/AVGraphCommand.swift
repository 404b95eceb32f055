import ArgumentParser
import AVGraph
import AVGraphNodes
import CFFmpeg
import Foundation

@main
struct AVGraphCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "avgraph",
        abstract: "Run audio/video pipelines described as a graph of nodes in a .pipe file.",
        version: AVGraphVersion.long,
        subcommands: [RunCommand.self, CheckCommand.self, InspectCommand.self, CtlCommand.self, FeedCommand.self, ServeCommand.self]
    )

    /// ArgumentParser exits 64 on usage errors; docs/PIPE-FORMAT.md promises 2.
    static func main() {
        ProcessSignals.prepareStandardStreams()
        if ProcessInfo.processInfo.environment["AVGRAPH_FFMPEG_LOG"] == nil { FFmpegLog.errorsOnly() } else { FFmpegLog.verbose() }
        // The live budget (50 MB for a phone's broadcast extension) counts resident pages: keep
        // x264's buffers on ordinary pages, resident only where touched.
        _ = avg_disable_transparent_hugepages()
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// The built-in node set plus, later, plugins.
func makeRegistry() -> NodeRegistry { BuiltinNodes.registry() }

/// Parses `--set` arguments, refusing malformed ones as usage errors.
func parseOverrides(_ sets: [String]) throws -> [OptionOverride] {
    try sets.map { s in
        guard let o = OptionOverride(parsing: s) else {
            throw ValidationError("--set takes NODE.OPTION=VALUE, got '\(s)'")
        }
        return o
    }
}

enum Terminal {
    static let isTTY = isatty(STDERR_FILENO) != 0
    static func err(_ s: String) { StandardStreams.write(s + "\n", to: STDERR_FILENO) }
}
