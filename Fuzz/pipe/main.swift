import AVGraph
import AVGraphNodes
import CFuzzDriver
import Foundation

/// libFuzzer target: bytes as a `.pipe` file through the loader and the whole of `check`
/// (the file's plugins are not loaded: `check` never runs them). Any crash, leak report or
/// timeout is a finding; a diagnostic is the expected answer to garbage.
let registry: NodeRegistry = {
    FFmpegLog.errorsOnly()
    return BuiltinNodes.registry()
}()
let folder = NSTemporaryDirectory() + "avgraph-fuzz-pipe"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPipe(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let checked = Checker(registry: registry).check(contents: Data(bytes: bytes, count: count), path: folder + "/fuzz.pipe")
    for d in checked.diagnostics where d.location.line < 1 || d.location.column < 1 || d.message.isEmpty {
        fatalError("a diagnostic without a place or a message: \(d)")
    }
    return 0
}

@_cdecl("FuzzPipe_main")
public func fuzzPipeMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzPipe($0!, $1) }
}
