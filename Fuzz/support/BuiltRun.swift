import AVGraph
import AVGraphNodes
import Foundation

/// A run of a `.pipe` text with the built-in nodes, built and not started, FFmpeg's log quiet:
/// what the control and HTTP targets answer against. Its folder is a scratch one in the
/// temporary folder, named after the target.
public func builtRun(_ text: String, target: String) -> PipelineRun {
    FFmpegLog.errorsOnly()
    let folder = NSTemporaryDirectory() + "avgraph-fuzz-\(target)"
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    var checker = Checker(registry: BuiltinNodes.registry())
    checker.loadsFilePlugins = false
    let checked = checker.check(contents: Data(text.utf8), path: "\(folder)/\(target).pipe")
    precondition(checked.isValid, "\(checked.diagnostics)")
    return try! PipelineRun(checked, events: EventLog(output: .none), realtime: false)
}
