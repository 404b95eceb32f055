import Foundation

/// Where each part of a `file` sink's recording goes. `{part}` in the file name becomes the part
/// number, three digits at least (`001`, `002`, ... `999`, `1000`); with `split` and no `{part}`,
/// `-001`... goes before the extension (`rec.mp4` gives `rec-001.mp4`). Without `split` the one
/// file is part 1 (`{part}` reads `001`).
struct PartPaths: Sendable {
    static let placeholder = "{part}"

    /// The path with `{part}` where the number goes.
    let template: String

    init(_ path: String, split: Bool) {
        if path.contains(Self.placeholder) || !split {
            template = path
        } else {
            let ext = (path as NSString).pathExtension
            let stem = ext.isEmpty ? path : String(path.dropLast(ext.count + 1))
            template = stem + "-" + Self.placeholder + (ext.isEmpty ? "" : "." + ext)
        }
    }

    static func number(_ part: Int) -> String {
        let digits = String(part)
        return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
    }

    func path(_ part: Int) -> String { template.replacingOccurrences(of: Self.placeholder, with: Self.number(part)) }

    /// Why the template cannot name parts, if it cannot: `{part}` must be in the file name (a
    /// folder per part would have to exist before its part).
    var problem: String? {
        let folder = (template as NSString).deletingLastPathComponent
        return folder.contains(Self.placeholder) ? "{part} may stand only in the file name, not in a folder ('\(template)')" : nil
    }

    /// The files already there that a recording with this template would write over: any part
    /// number, so a second run does not mix its parts with the first one's.
    func existing() -> [String] {
        guard template.contains(Self.placeholder) else {
            return FileManager.default.fileExists(atPath: template) ? [template] : []
        }
        let folder = (template as NSString).deletingLastPathComponent
        let name = (template as NSString).lastPathComponent
        let pieces = name.components(separatedBy: Self.placeholder)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder.isEmpty ? "." : folder)) ?? []
        return entries.filter { entry in
            // The name with each {part} read as a number of three digits or more.
            var rest = Substring(entry)
            for (i, piece) in pieces.enumerated() {
                guard rest.hasPrefix(piece) else { return false }
                rest = rest.dropFirst(piece.count)
                if i == pieces.count - 1 { return rest.isEmpty }
                let digits = rest.prefix { $0.isASCII && $0.isNumber }
                guard digits.count >= 3 else { return false }
                rest = rest.dropFirst(digits.count)
            }
            return false
        }.sorted().map { (folder as NSString).appendingPathComponent($0) }
    }
}
