@testable import AVGraph
import AVGraphNodes
import CFuzzDriver
import Foundation

/// libFuzzer target: bytes as one line a control client sends. The line is parsed as the server
/// parses it (a JSON object) and answered by `ControlCommands` against a built, not started, run
/// of a pipeline whose nodes have live options of several types. A `set` goes as far as parsing
/// its value (`ControlCommands.setValue`): handing it to a node needs the node's thread.
let run: PipelineRun = {
    FFmpegLog.errorsOnly()
    let folder = NSTemporaryDirectory() + "avgraph-fuzz-control"
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let text = """
    nodes:
      screen: {type: testsrc, size: 64x48, rate: 10}
      turn:   {type: orient, in: screen}
      app:    {type: tone, freq: 440}
      mic:    {type: tone, freq: 880}
      mix:    {type: mixer, in: [app, mic], gain: {mic: 1.5}}
      fit:    {type: resize, in: turn, size: 64x48}
      video:  {type: h264, in: fit, bitrate: 500k}
      out:    {type: null, in: [video, mix]}
    """
    var checker = Checker(registry: BuiltinNodes.registry())
    checker.loadsFilePlugins = false
    let checked = checker.check(contents: Data(text.utf8), path: folder + "/control.pipe")
    precondition(checked.isValid, "\(checked.diagnostics)")
    return try! PipelineRun(checked, events: EventLog(output: .none), realtime: false)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControl(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let line = Data(bytes: bytes, count: count)
    guard let object = try? JSONSerialization.jsonObject(with: line), let request = object as? [String: Any] else { return 0 }
    let reply: [String: Any]
    if request["cmd"] as? String == "set" {
        guard let (node, spec) = ControlCommands.lookup(request, run) else {
            reply = ControlCommands.lookupError(request, run)
            return check(reply)
        }
        switch ControlCommands.setValue(request, node: node.name, spec: spec) {
        case .success(let value): reply = ["ok": true, "value": value.text]
        case .failure(let refusal): reply = refusal.reply
        }
    } else {
        reply = ControlCommands.handle(request, run: run, startWatching: {})
        if request["cmd"] as? String == "pause" { _ = run.resume() }
    }
    return check(reply)
}

/// Every answer is a JSON object the server can send, with `ok`.
func check(_ reply: [String: Any]) -> CInt {
    precondition(reply["ok"] is Bool, "an answer without ok: \(reply)")
    precondition(JSONSerialization.isValidJSONObject(reply), "an answer that is not JSON: \(reply)")
    return 0
}

@_cdecl("FuzzControl_main")
public func fuzzControlMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzControl($0!, $1) }
}
