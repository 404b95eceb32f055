import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A plugin that could not be loaded. Every message names the plugin file.
public struct PluginError: Error, CustomStringConvertible, Sendable {
    public enum Reason: Sendable, Equatable {
        case notFound
        case notAPlugin
        case wrongVersion(plugin: Int32, host: Int32)
        case duplicate(type: String, first: String)
        case registrationFailed
        /// Writable by others, or owned by another user: it could hold someone else's code.
        case untrusted
    }

    public var file: String
    public var reason: Reason
    public var message: String

    public var description: String { message }
}

/// Loads node types from plugin files into a registry. The only place that calls dlopen/dlsym.
///
/// A plugin file is a shared library exporting `avgraph_plugin` (see `PluginAPI`). A folder
/// stands for every `*.so` in it that exports the entry point. Loading a file already loaded into
/// the same registry is a no-op.
///
/// No code of a file runs before it is known to be a plugin and trusted: its ELF symbol table is
/// read (not dlopen'ed, which runs constructors), and the file and its folder must be writable by
/// their owner only and owned by us or root (`PluginFile`).
public enum PluginLoader {
    /// The entries of `AVGRAPH_PLUGIN_PATH` (colon-separated files or folders).
    public static func environmentPaths(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        (environment["AVGRAPH_PLUGIN_PATH"] ?? "").split(separator: ":").map(String.init).filter { !$0.isEmpty }
    }

    /// Loads every path (file or folder) into `registry`; the first failure stops and is thrown.
    public static func load(_ paths: [String], into registry: NodeRegistry, warn: (String) -> Void = PluginLoader.printWarning) throws(PluginError) {
        for p in paths { try load(p, into: registry, warn: warn) }
    }

    public static func printWarning(_ message: String) {
        FileHandle.standardError.write(Data("warning: \(message)\n".utf8))
    }

    /// Loads one file, or every plugin among the `*.so` of a folder, into `registry`. Returns the
    /// types added. In a folder, a library that is not a plugin or not trusted is skipped with a
    /// warning (a folder of libraries may hold others); a file named alone must load.
    @discardableResult
    public static func load(_ path: String, into registry: NodeRegistry, warn: (String) -> Void = PluginLoader.printWarning) throws(PluginError) -> [any Node.Type] {
        let fm = FileManager.default
        var isDir: ObjCBool = false
        guard fm.fileExists(atPath: path, isDirectory: &isDir) else {
            throw PluginError(file: path, reason: .notFound, message: "plugin \(path): file not found")
        }
        if isDir.boolValue {
            let folder = URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
            if let why = PluginFile.distrust(folder) {
                throw PluginError(file: path, reason: .untrusted, message: "plugin folder \(path) refused: \(why)")
            }
            let files = ((try? fm.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".so") }.sorted()
            var added: [any Node.Type] = []
            for f in files {
                let file = (path as NSString).appendingPathComponent(f)
                do { added += try loadFile(file, into: registry) } catch {
                    switch error.reason {
                    case .notAPlugin, .untrusted, .notFound: warn("\(error.message); skipped")
                    default: throw error
                    }
                }
            }
            return added
        }
        return try loadFile(path, into: registry)
    }

    static func loadFile(_ given: String, into registry: NodeRegistry) throws(PluginError) -> [any Node.Type] {
        let path = URL(fileURLWithPath: given).standardizedFileURL.resolvingSymlinksInPath().path
        if registry.origins.values.contains(path) { return [] }
        func fail(_ reason: PluginError.Reason, _ what: String) -> PluginError {
            PluginError(file: path, reason: reason, message: "plugin \(path): \(what)")
        }
        if let why = PluginFile.distrust(path) {
            throw fail(.untrusted, "refused: \(why)")
        }
        switch PluginFile.dynamicSymbols(of: path, defining: PluginAPI.entrySymbol) {
        case .notELF: throw fail(.notAPlugin, "not a plugin: not a 64-bit ELF shared library")
        case .lacks: throw fail(.notAPlugin, "not a plugin: it has no '\(PluginAPI.entrySymbol)' entry point")
        case .exports: break
        }
        // RTLD_GLOBAL is not needed: the plugin takes AVGraph from the program, never the other way.
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let why = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            if why.contains("undefined symbol") {
                throw fail(.notAPlugin, "cannot be loaded: \(why) (is it built for this avgraph? see docs/WRITING-NODES.md)")
            }
            throw fail(.notAPlugin, "not a plugin: not a loadable shared library (\(why))")
        }
        // The handle stays open for the life of the process, even when refused: node types live
        // in it, and the Swift runtime has registered its metadata sections, which dlclose would unmap.
        guard let symbol = dlsym(handle, PluginAPI.entrySymbol) else {
            throw fail(.notAPlugin, "not a plugin: it has no '\(PluginAPI.entrySymbol)' entry point")
        }
        typealias Entry = @convention(c) (Int32, UnsafeMutableRawPointer?) -> Int32
        let entry = unsafeBitCast(symbol, to: Entry.self)
        // The version comes first: without a registrar the plugin only states it.
        let host = PluginAPI.version
        let stated = entry(host, nil)
        guard stated == host else {
            throw fail(.wrongVersion(plugin: stated, host: host),
                       "built for plugin API version \(stated), this avgraph speaks version \(host); rebuild the plugin against this avgraph")
        }
        let registrar = PluginRegistrar(file: path)
        _ = withExtendedLifetime(registrar) { entry(host, Unmanaged.passUnretained(registrar).toOpaque()) }
        if let error = registrar.error {
            throw fail(.registrationFailed, "failed while registering its nodes: \(error)")
        }
        // All or nothing: a clash leaves the registry as it was.
        for t in registrar.types {
            if let first = registry.origins[t.typeName] {
                throw fail(.duplicate(type: t.typeName, first: first), "node type '\(t.typeName)' is already registered by \(first)")
            }
        }
        let trial = registry.copy()
        for t in registrar.types {
            do { try trial.register(t, origin: path) } catch {
                throw fail(.duplicate(type: t.typeName, first: path), "\(error)")
            }
        }
        for t in registrar.types {
            do { try registry.register(t, origin: path) } catch {
                throw fail(.duplicate(type: t.typeName, first: path), "\(error)")
            }
        }
        return registrar.types
    }
}
