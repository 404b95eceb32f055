import AVGraph
import Foundation
import Synchronization

/// The keys a listening network source admits a publisher with: for RTMP `app/stream` or just
/// `stream` (in the URL's application), for SRT the stream id. They come from the `.pipe`
/// (`keys:`), a keys file (`keys-file:`, one per line, `#` comments, read again when it
/// changes) and the `AVGRAPH_KEYS` environment variable (comma or newline separated); with none
/// of these, the stream name in the URL is the one key. Keys are compared in constant time and
/// never printed.
package final class PublisherKeys: Sendable {
    package static let environment = "AVGRAPH_KEYS"

    private let fixed: [String]
    private let file: String?
    /// The keys file as last read; the lock is held while it is read again.
    private let read = Mutex<(keys: [String], stamp: FileStamp?)>(([], nil))

    private struct FileStamp: Equatable, Sendable {
        var inode: UInt64, size: Int64, seconds: Int, nanoseconds: Int
    }

    /// `urlKey`: the URL's own stream name, the key when nothing else names one.
    package init(keys: [String], file: String?, environment: [String: String] = ProcessInfo.processInfo.environment, urlKey: String?) throws {
        var fixed = keys
        if let env = environment[Self.environment] { fixed += Self.parse(env.replacingOccurrences(of: ",", with: "\n")) }
        if fixed.isEmpty && file == nil, let urlKey, !urlKey.isEmpty { fixed = [urlKey] }
        self.fixed = fixed.filter { !$0.isEmpty }
        self.file = file
        if let file {
            guard FileManager.default.isReadableFile(atPath: file) else { throw MediaError("cannot read the keys file \(file)") }
            refresh()
        }
    }

    /// True when nothing at all could admit a publisher.
    package var isEmpty: Bool { current().isEmpty }

    /// The keys now (the file read again first when it changed since the last look).
    package func current() -> [String] {
        refresh()
        return fixed + read.withLock { $0.keys }
    }

    /// Whether `candidate` is one of the keys: every key is compared, each in constant time.
    package func admits(_ candidates: [String]) -> Bool {
        var found = false
        for key in current() {
            for c in candidates where Self.constantTimeEqual(key, c) { found = true }
        }
        return found
    }

    private func refresh() {
        guard let file else { return }
        var st = stat()
        let stamp: FileStamp? = stat(file, &st) == 0
            ? FileStamp(inode: UInt64(st.st_ino), size: Int64(st.st_size), seconds: st.st_mtim.tv_sec, nanoseconds: st.st_mtim.tv_nsec) : nil
        read.withLock { r in
            guard stamp != r.stamp || stamp == nil else { return }
            r.stamp = stamp
            // Unreadable now (removed, being replaced): no key from it until it is back.
            let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
            r.keys = Self.parse(text)
        }
    }

    /// One key per line; blank lines and `#` comments skipped, white space around a key trimmed.
    package static func parse(_ text: String) -> [String] {
        text.split(whereSeparator: \.isNewline).compactMap { line in
            let t = line.trimmingCharacters(in: .whitespaces)
            return t.isEmpty || t.hasPrefix("#") ? nil : t
        }
    }

    /// Equal bytes, in a time that depends on the lengths only.
    package static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        if x.isEmpty || y.isEmpty { return x.count == y.count }
        var diff: UInt8 = x.count == y.count ? 0 : 1
        for i in 0..<max(x.count, y.count) { diff |= x[i % x.count] ^ y[i % y.count] }
        return diff == 0
    }
}
