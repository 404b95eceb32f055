import AVGraph
import AVGraphNodes
import Foundation

/// Where `avgraph feed` sends: a socket path as given, or a running pipeline's `socket` source
/// by name, found in the private runtime folder (`PIPELINE.NODE.ingest.sock`).
enum FeedTarget {
    struct Failure: Error, CustomStringConvertible { let description: String }

    /// The socket path for `target`: a path (it has a '/' or ends in .sock), `PIPELINE.NODE`, or
    /// `PIPELINE` when that pipeline has exactly one socket source (waits up to `wait` seconds
    /// for it to appear, so feed may start just before the run).
    static func path(_ target: String, wait: Double) throws -> String {
        if target.contains("/") || target.hasSuffix(".sock") { return target }
        // PIPELINE.NODE (node names have no dot, pipeline names may).
        var named: String?
        if let dot = target.lastIndex(of: ".") {
            let node = String(target[target.index(after: dot)...])
            named = PrivateSocket.expectedPath(SocketSourceNode.ingestName(pipeline: String(target[..<dot]), node: node))
        }
        let folder = (PrivateSocket.expectedPath("x") as NSString).deletingLastPathComponent
        let prefix = target + ".", suffix = ".ingest.sock"
        let deadline = Monotonic.now + wait
        let watch = FolderWatch(folder)
        while true {
            var st = stat()
            if let named, lstat(named, &st) == 0 { return named }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
                .filter { $0.hasPrefix(prefix) && $0.hasSuffix(suffix) && $0.count > prefix.count + suffix.count
                    && !$0.dropFirst(prefix.count).dropLast(suffix.count).contains(".") }
                .sorted()
            if names.count == 1 { return folder + "/" + names[0] }
            if names.count > 1 {
                let nodes = names.map { $0.dropFirst(prefix.count).dropLast(suffix.count) }
                throw Failure(description: "pipeline '\(target)' has several socket sources (\(nodes.joined(separator: ", "))): "
                    + "name one, e.g. \(target).\(nodes[0])")
            }
            if Monotonic.now >= deadline {
                throw Failure(description: "no socket source of a pipeline named '\(target)' is listening in \(folder) "
                    + "(give PIPELINE.NODE or the socket's path)")
            }
            watch.wait(until: deadline)
        }
    }
}
