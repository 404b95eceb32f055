import AVGraph
import Foundation

/// The command line of one session's run, and where its files will be: the template's
/// placeholders filled for this publish. Pure.
public struct RunArguments: Sendable, Equatable {
    public var arguments: [String]
    /// File sinks' paths by node, as this run will write them.
    public var sinkPaths: [String: String]

    /// `sets` are every run's `--set` (placeholders filled here), `overrides` the backend's (as given: they win).
    public init(template: String, session: String, key: String, app: String, start: Date, sets: [String], overrides: [String],
                pages: Bool, sinkPaths: [String: String]) {
        let values = ["key": key, "app": app.isEmpty ? "_" : app, "session": session, "start": TemplatePlaceholders.stamp(start)]
        var arguments = ["run", template, "--name", session, "--events", "json"]
        for name in TemplatePlaceholders.names { arguments += ["--placeholder", "\(name)=\(values[name] ?? "")"] }
        for s in sets { arguments += ["--set", TemplatePlaceholders.fill(s, values)] }
        for s in overrides { arguments += ["--set", s] }
        if pages { arguments += ["--http", "127.0.0.1:0"] }
        self.arguments = arguments
        var paths = sinkPaths
        let folder = (template as NSString).deletingLastPathComponent
        for s in sets + overrides {
            guard let o = OptionOverride(parsing: s), o.option == "path", paths[o.node] != nil else { continue }
            paths[o.node] = o.value.hasPrefix("/") ? o.value : (folder as NSString).appendingPathComponent(o.value)
        }
        self.sinkPaths = paths.mapValues { TemplatePlaceholders.fill($0, values) }
    }
}
