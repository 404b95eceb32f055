import AVGraph

/// A plugin built for a future plugin API: it states version 999 and must never be asked to register.
@_cdecl("avgraph_plugin")
public func avgraphPlugin(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?) -> Int32 {
    if registrar != nil { fatalError("the host must not register a plugin of another version") }
    return 999
}
