import AVGraph

struct Refusal: Error, CustomStringConvertible {
    var description: String { "the license key is missing" }
}

/// A plugin whose registration throws.
@_cdecl("avgraph_plugin")
public func avgraphPlugin(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?) -> Int32 {
    PluginAPI.entry(hostVersion, registrar) { _ in throw Refusal() }
}
