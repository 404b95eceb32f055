import ArgumentParser
import AVGraph
import Foundation

struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate .pipe files without running them.",
        discussion: "Exit status: 0 all valid, 1 a file has errors, 2 usage error."
    )

    enum OutputFormat: String, ExpressibleByArgument { case text, json, dot }

    @Argument(help: "The .pipe files to check.")
    var files: [String]

    @Option(name: .long, help: "Output format: text (GCC-style), json, or dot (the graph for Graphviz, each edge labelled with its format).")
    var format: OutputFormat = .text

    @Option(name: .customLong("set"), help: "Override an option: NODE.OPTION=VALUE (repeatable).")
    var sets: [String] = []

    @OptionGroup var pluginOptions: PluginOptions
    @OptionGroup var fileTrust: FilePluginTrust

    func validate() throws {
        if files.isEmpty { throw ValidationError("give at least one .pipe file") }
    }

    func run() throws {
        var checker = Checker(registry: try pluginOptions.registry(), overrides: try parseOverrides(sets))
        checker.loadsFilePlugins = fileTrust.allowPlugins
        var anyInvalid = false
        var printer = DiagnosticPrinter()
        var reports: [FileReport] = []
        for file in files {
            let result = checker.check(path: file)
            anyInvalid = anyInvalid || !result.isValid
            switch format {
            case .text:
                for d in result.diagnostics { print(printer.render(d, path: file)) }
                let errors = result.diagnostics.filter { $0.severity == .error }.count
                let warnings = result.diagnostics.filter { $0.severity == .warning }.count
                if errors == 0 {
                    print("\(file): ok (\(result.nodes.count) nodes\(warnings > 0 ? ", \(warnings) warning\(warnings == 1 ? "" : "s")" : ""))")
                } else {
                    print("\(file): \(errors) error\(errors == 1 ? "" : "s")\(warnings > 0 ? ", \(warnings) warning\(warnings == 1 ? "" : "s")" : "")")
                }
            case .json:
                reports.append(FileReport(
                    file: file, valid: result.isValid, diagnostics: result.diagnostics,
                    nodes: result.nodes.map { .init(name: $0.name, type: $0.type.typeName, outputs: $0.outputs.map(\.description)) },
                    edges: result.edges.map(\.link)))
            case .dot:
                // The picture goes to stdout; what is wrong with the file goes where a person looks.
                for d in result.diagnostics { Terminal.err(printer.render(d, path: file)) }
                if result.isValid { print(GraphDot.render(result.graph), terminator: "") }
            }
        }
        if format == .json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = try encoder.encode(["files": reports])
            print(String(decoding: data, as: UTF8.self))
        }
        if anyInvalid { throw ExitCode(1) }
    }
}

/// One file's result in `check --format json`.
struct FileReport: Encodable {
    struct NodeReport: Encodable {
        var name: String
        var type: String
        var outputs: [String]
    }

    var file: String
    var valid: Bool
    var diagnostics: [Diagnostic]
    var nodes: [NodeReport]
    var edges: [PipelineGraph.Link]
}
