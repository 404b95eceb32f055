import AVGraph
import Foundation
import Synchronization

/// Sends a finished file to an HTTP server (the `file` sink's `upload`): one request with a
/// `Content-Length` body streamed from disk (never the whole file in memory) over libavformat's
/// `tcp`/`tls` protocols (HTTPBodyRequest), retried with backoff (1 s doubling up to 30 s) until
/// `attempts` are used. Any 2xx status is success. `https://` checks the server's certificate
/// (against `ca` when given) and name. A stop of the run during a backoff ends it at once.
struct Upload {
    let target: UploadTarget
    var timeout = 30.0

    /// Uploads `path`; emits `uploaded` (status, bytes, attempts, seconds) or throws after the
    /// last attempt (or a stop during a backoff), naming the upload; the file stays where it is either way.
    func send(_ path: String, _ out: Outlet) throws {
        let started = Date()
        let stop = CancelFlag()
        // An upload that starts while the run is stopping is part of that clean end: only a stop
        // that comes later cuts its backoff short.
        if !out.isStopping { out.onWake { [stop] in if out.isStopping { stop.cancel() } } }
        var delay = 1.0
        var lastError = ""
        for attempt in 1...max(1, target.attempts) {
            do {
                let answer = try once(path)
                out.event(UploadedEvent(path: path, url: target.shownURL, status: answer.status, bytes: answer.bytes, attempts: attempt,
                                        seconds: (Date().timeIntervalSince(started) * 1000).rounded() / 1000))
                return
            } catch {
                lastError = "\(error)"
                out.warning("upload of '\(path)' to \(target.shownURL) failed (attempt \(attempt) of \(target.attempts)): \(error)")
                if attempt < target.attempts {
                    if stop.wait(seconds: delay) {
                        throw MediaError("upload of '\(path)' to \(target.shownURL) stopped after \(attempt) attempt\(attempt == 1 ? "" : "s"): \(lastError); the file is kept")
                    }
                    delay = min(delay * 2, 30)
                }
            }
        }
        throw MediaError("upload of '\(path)' to \(target.shownURL) failed after \(target.attempts) attempt\(target.attempts == 1 ? "" : "s"): \(lastError); the file is kept")
    }

    /// One request: the HTTP status (2xx) and the bytes sent.
    private func once(_ path: String) throws -> HTTPBodyRequest.Answer {
        var headers = target.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        if !headers.contains(where: { $0.0.lowercased() == "content-type" }) { headers.append(("Content-Type", Self.contentType(path))) }
        // A request under way runs to its answer or its timeout even if the run stops meanwhile
        // (the file may be what the stop was waiting for); only the backoff is cut short.
        let answer = try HTTPBodyRequest.send(path, to: target.url, method: target.method, headers: headers, caFile: target.caFile,
                                              timeout: timeout, cancel: CancelFlag())
        guard (200..<300).contains(answer.status) else { throw HTTPBodyRequest.Failure(description: "the server answered \(answer.line)") }
        return answer
    }

    static func contentType(_ path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "mp4": return "video/mp4"
        case "mov": return "video/quicktime"
        case "mkv": return "video/x-matroska"
        case "ts": return "video/mp2t"
        case "flv": return "video/x-flv"
        default: return "application/octet-stream"
        }
    }
}

/// The uploads of a `split` recording's parts: one after another, in order, on a thread of their
/// own, so a slow server (or a backoff) never holds the media the sink is still writing. A
/// failure is kept for the sink, which fails the run with it; the file stays either way.
final class PartUploads: Sendable {
    private let target: UploadTarget
    private let queue = DispatchQueue(label: "avgraph.file.uploads")
    private let state = Mutex<(sending: Set<String>, failure: String?)>(([], nil))

    init(_ target: UploadTarget) { self.target = target }

    /// Sends `path` after the ones before it; `{part}` in the URL becomes the part number.
    func enqueue(_ path: String, part: Int, _ out: Outlet) {
        var target = target
        target.url = target.url.replacingOccurrences(of: PartPaths.placeholder, with: PartPaths.number(part))
        let upload = Upload(target: target)
        state.withLock { _ = $0.sending.insert(path) }
        queue.async { [self] in
            do {
                try upload.send(path, out)
            } catch {
                state.withLock { if $0.failure == nil { $0.failure = "\(error)" } }
            }
            state.withLock { _ = $0.sending.remove(path) }
        }
    }

    /// Whether `path` waits for its upload or is being sent (`keep` leaves it alone meanwhile).
    func isSending(_ path: String) -> Bool { state.withLock { $0.sending.contains(path) } }

    /// The first upload that failed, as the run's error.
    func checkFailure() throws {
        if let failure = state.withLock({ $0.failure }) { throw MediaError(failure) }
    }

    /// Returns when every upload asked for so far is over; throws the first failure.
    func finish() throws {
        queue.sync {}
        try checkFailure()
    }
}
