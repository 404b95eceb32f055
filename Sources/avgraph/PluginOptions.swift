import ArgumentParser
import AVGraph
import AVGraphNodes

/// `--plugin PATH` (repeatable) and `AVGRAPH_PLUGIN_PATH`, shared by run, check and inspect.
struct PluginOptions: ParsableArguments {
    @Option(name: .customLong("plugin"), help: ArgumentHelp(
        "Load node types from a plugin file or folder (repeatable); AVGRAPH_PLUGIN_PATH adds more (colon-separated).",
        valueName: "path"))
    var plugins: [String] = []

    /// The built-in nodes plus the plugins of AVGRAPH_PLUGIN_PATH and --plugin, in that order.
    /// A plugin that cannot be loaded is an error naming its file (exit status 1).
    func registry() throws -> NodeRegistry {
        let registry = BuiltinNodes.registry()
        do { try PluginLoader.load(PluginLoader.environmentPaths() + plugins, into: registry) } catch {
            Terminal.err("error: \(error.message)")
            throw ExitCode(1)
        }
        return registry
    }
}

/// `--allow-plugins` of `check` and `inspect FILE`: without it the plugins a `.pipe` file names
/// are not loaded, so looking at a file runs none of its code.
struct FilePluginTrust: ParsableArguments {
    @Flag(name: .customLong("allow-plugins"), help: "Load the plugins a .pipe file names (runs their code); without it their node types are reported as not loaded.")
    var allowPlugins = false
}
