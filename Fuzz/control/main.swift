@testable import AVGraph
import AVGraphNodes
import CFuzzDriver
import Foundation
import FuzzSupport

/// libFuzzer target: bytes as one line a control client sends. The line is parsed as the server
/// parses it (a typed `ControlEnvelope`) and answered by `ControlCommands` against a built, not started, run
/// of a pipeline whose nodes have live options of several types, through `answer(controlLine:)`.
/// A `set` goes as far as parsing its value (`ControlCommands.setValue`): handing it to a node
/// needs the node's thread.
let run = builtRun("""
    nodes:
      screen: {type: testsrc, size: 64x48, rate: 10}
      turn:   {type: orient, in: screen}
      app:    {type: tone, freq: 440}
      mic:    {type: tone, freq: 880}
      mix:    {type: mixer, in: [app, mic], gain: {mic: 1.5}}
      fit:    {type: resize, in: turn, size: 64x48}
      video:  {type: h264, in: fit, bitrate: 500k}
      out:    {type: null, in: [video, mix]}
    """, target: "control")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControl(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let line = Array(UnsafeBufferPointer(start: bytes, count: count))
    guard case .success(let envelope) = ControlEnvelope.decode(line: Data(line)), case .set(let change) = envelope.request else {
        let reply = run.answer(controlLine: line)
        if case .success(let e) = ControlEnvelope.decode(line: Data(line)), e.request == .pause { _ = run.resume() }
        return check(reply)
    }
    let outcome: Result<any ControlReplyBody, ControlRefusal> = ControlCommands.lookup(change.target, run).flatMap { found in
        let (node, spec) = found
        return ControlCommands.setValue(change.value, node: node.name, spec: spec)
            .map { OptionReply(node: node.name, option: spec.name, value: $0.text) as any ControlReplyBody }
    }
    return check(ControlReply(outcome, id: envelope.id).line)
}

/// Every answer is one line of JSON with `ok`, as a client reads it.
func check(_ reply: [UInt8]) -> CInt {
    precondition(!reply.contains(10), "an answer of more than one line: \(String(decoding: reply, as: UTF8.self))")
    precondition((try? ControlAnswer<EmptyReply>.decode(line: Data(reply))) != nil, "an answer without ok: \(String(decoding: reply, as: UTF8.self))")
    return 0
}

@_cdecl("FuzzControl_main")
public func fuzzControlMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzControl($0!, $1) }
}
