import Foundation

public enum PathResolver {
    /// Resolves `path` against `base` unless it is absolute; expands a leading `~`.
    public static func resolve(_ path: String, relativeTo base: String) -> String {
        var p = path
        if p.hasPrefix("~/") { p = NSHomeDirectory() + p.dropFirst(1) }
        if p.hasPrefix("/") { return (p as NSString).standardizingPath }
        return ((base as NSString).appendingPathComponent(p) as NSString).standardizingPath
    }
}
