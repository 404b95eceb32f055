/// The contract between avgraph and a plugin: one C entry point, `avgraph_plugin`.
///
/// A plugin is a shared library built against the `AVGraph` library. It exports
///
///     @_cdecl("avgraph_plugin")
///     public func avgraphPlugin(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?) -> Int32 {
///         PluginAPI.entry(hostVersion, registrar) { r in
///             try r.register(WatermarkNode.self)
///         }
///     }
///
/// The C signature `int32_t avgraph_plugin(int32_t host_version, void *registrar)` never changes.
/// The plugin answers the API version it was built for; it touches the registrar only when that
/// version equals the host's (`PluginAPI.entry`, compiled into the plugin, compares first), so a
/// plugin built for another version is refused before any of its Swift code meets the host's types.
public enum PluginAPI {
    /// The name of the entry point a plugin exports.
    public static let entrySymbol = "avgraph_plugin"

    /// The plugin API version. Compiled into each plugin (`@_alwaysEmitIntoClient`), so a
    /// plugin states the version it was built against, not the version of the host it runs in.
    /// Raise it whenever `Node`, `NodeSetup`, `Negotiation`, `Setting`, `Outlet`, `Frame` or friends change
    /// incompatibly (2: typed settings, live changes owned by the runtime; 3: hooks on the role
    /// classes `Source`, `Filter` and `Sink`; 4: node types declare their event kinds and option
    /// value types, `Node.events`, `NodeEvent`, `OptionValueType`; 5: `Node.sharesProducerThread`
    /// and `Node.keepsDeadlines`).
    @_alwaysEmitIntoClient
    public static var version: Int32 { 5 }

    /// The body of a plugin's `avgraph_plugin`: compares versions, then lets `register` add node
    /// types. A throw is recorded for the host, which reports it naming the plugin file.
    @_alwaysEmitIntoClient
    public static func entry(_ hostVersion: Int32, _ registrar: UnsafeMutableRawPointer?,
                             _ register: (PluginRegistrar) throws -> Void) -> Int32 {
        let mine = version
        guard hostVersion == mine, let registrar else { return mine }
        let r = Unmanaged<PluginRegistrar>.fromOpaque(registrar).takeUnretainedValue()
        do { try register(r) } catch { r.failed(error) }
        return mine
    }
}

/// What a plugin's entry point registers its node types with. Made by `PluginLoader`.
public final class PluginRegistrar {
    /// The plugin file being loaded.
    public let file: String
    public private(set) var types: [any Node.Type] = []
    public private(set) var error: (any Error)?

    init(file: String) { self.file = file }

    public func register(_ type: any Node.Type) throws {
        if let problem = NodeRegistry.roleProblem(type) { throw NodeRegistry.RegistrationError.role(type.typeName, problem) }
        types.append(type)
    }

    public func failed(_ error: any Error) {
        self.error = error
    }
}
