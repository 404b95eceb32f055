import AVGraphNodes
import AVGraphTransport
import Foundation

/// What `avgraph serve`'s flags say, checked: the program (ServeCommand) makes one and hands it to `ServeServer`.
public struct ServeConfiguration: Sendable {
    /// The template .pipe (its source `{type: publisher}`).
    public var template: String
    public var doors: [PublisherDoor]
    /// `--auth`: asked before each publish; nil admits every publisher the doors let in.
    public var auth: URL?
    public var hooks: HookQueue?
    /// The template's file sinks' paths with their placeholders, by node.
    public var sinkPaths: [String: String]
    /// Each run serves its operator page on loopback (for `--http`'s index).
    public var pages: Bool
    /// `--set` for every run, placeholders and all.
    public var sets: [String]
    /// The program each run is (`avgraph`, as `EXECUTABLE run TEMPLATE ...`).
    public var executable: URL
    public var log: ServeLog
    /// Admissions asked about and started at once (threads, started as arrivals need them); arrivals
    /// beyond `admissionBacklog` waiting are refused.
    public var admissionWorkers = 8
    public var admissionBacklog = 64

    public init(template: String, doors: [PublisherDoor], auth: URL?, hooks: HookQueue?, sinkPaths: [String: String], pages: Bool,
                sets: [String], executable: URL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath(), log: ServeLog = .stderr) {
        self.template = template; self.doors = doors; self.auth = auth; self.hooks = hooks; self.sinkPaths = sinkPaths
        self.pages = pages; self.sets = sets; self.executable = executable; self.log = log
    }
}
