import AVGraph

@_cdecl("avgraph_plugin")
public func avgraphPlugin(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?) -> Int32 {
    PluginAPI.entry(hostVersion, registrar) { r in
        try r.register(WatermarkNode.self)
    }
}
