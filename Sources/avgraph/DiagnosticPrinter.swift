import AVGraph
import Foundation

/// Prints diagnostics the way GCC does, with the offending line and a caret under the column.
struct DiagnosticPrinter {
    var sourceLines: [String: [Substring]] = [:]

    mutating func lines(of file: String, path: String) -> [Substring] {
        if let l = sourceLines[file] { return l }
        // Only what check itself read: a regular file within the size cap (not a FIFO, not 10 GB).
        var info = stat()
        let readable = stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && info.st_size <= PipeLoader.maxFileBytes
        let text = readable ? (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" : ""
        let l = text.split(separator: "\n", omittingEmptySubsequences: false)
        sourceLines[file] = l
        return l
    }

    mutating func render(_ d: Diagnostic, path: String) -> String {
        var out = "\(d.location): \(d.severity.rawValue): \(d.message)"
        let l = lines(of: d.location.file, path: path)
        if d.location.file != "--set", d.location.line >= 1, d.location.line <= l.count {
            let line = l[d.location.line - 1]
            // utf8.count, not count: a megabyte-long line must not be walked once per diagnostic.
            if line.utf8.count <= 200 {
                out += "\n    \(line)\n    \(String(repeating: " ", count: max(0, d.location.column - 1)))^"
            }
        }
        if let hint = d.hint { out += "\n\(d.location): note: \(hint)" }
        return out
    }
}
