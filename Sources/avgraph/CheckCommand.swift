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
        var reports: [[String: Any]] = []
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
                reports.append([
                    "file": file, "valid": result.isValid,
                    "diagnostics": result.diagnostics.map(\.json),
                    "nodes": result.nodes.map { n -> [String: Any] in
                        ["name": n.name, "type": n.type.typeName, "outputs": n.outputs.map(\.description)]
                    },
                    "edges": result.edges.map(\.json),
                ])
            case .dot:
                // The picture goes to stdout; what is wrong with the file goes where a person looks.
                for d in result.diagnostics { Terminal.err(printer.render(d, path: file)) }
                if result.isValid { print(GraphDot.render(result.graphJSON), terminator: "") }
            }
        }
        if format == .json {
            let data = try JSONSerialization.data(withJSONObject: ["files": reports], options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        }
        if anyInvalid { throw ExitCode(1) }
    }
}
