import AVGraph
import Foundation
import Synchronization

/// `avgraph serve --hooks URL`: each event one JSON body, signed (`X-Avgraph-Signature:
/// sha256=HEX`, HMAC-SHA256 of the body with the secret), written to a queue folder first
/// (beside the recordings) and POSTed from there by one thread, oldest first: so every
/// session's events go in the order they happened, a receiver that is down holds the queue
/// (retried with backoff, each event for 10 minutes), and one that comes back, or a `serve`
/// that restarts, delivers what waited. Media never waits on it: `post` only writes a file.
final class ServeHooks: Sendable {
    static let giveUpAfter = 600.0
    static let maxBackoff = 5.0

    let url: URL
    let folder: String
    private let secret: [UInt8]
    private let state = Mutex(State())
    /// Wakes the delivering thread: counts events queued and the stop, each taken by one wait.
    private let wake = ConditionLock(0)
    private let finished = ConditionLock(false)

    private struct State {
        var counter = 0
        var stopping = false
        var deadline = 0.0
    }

    init(url: URL, secret: [UInt8], folder: String) throws {
        self.url = url
        self.secret = secret
        self.folder = folder
        do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
            throw MediaError("--hooks-queue \(folder): cannot make the folder: \(error.localizedDescription)")
        }
    }

    func start() {
        let t = Thread { [self] in
            deliverAll()
            finished.withLockWakingAll { $0 = true }
        }
        t.name = "serve-hooks"
        t.start()
    }

    /// Queues one event: `fields` on top of the session's own (event, session, key, app,
    /// protocol, peer, time).
    func post(_ event: String, _ session: ServeSession.Identity, _ fields: [String: Any] = [:]) {
        var body: [String: Any] = ["event": event, "session": session.id, "key": session.key, "app": session.app,
                                   "protocol": session.scheme, "peer": session.peer, "time": Self.time(Date())]
        for (k, v) in fields { body[k] = v }
        guard let data = try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        let n = state.withLock { s -> Int in s.counter += 1; return s.counter }
        // Named so that sorting the folder is the order of events: across restarts too (the time first).
        let name = String(format: "%019llu-%06d-%@.json", UInt64(Date().timeIntervalSince1970 * 1e9), n % 1_000_000, UUID().uuidString.lowercased())
        let path = folder + "/" + name
        do {
            try data.write(to: URL(fileURLWithPath: path + ".tmp"))
            guard rename(path + ".tmp", path) == 0 else { throw MediaError(String(cString: strerror(errno))) }
        } catch {
            Terminal.err("avgraph serve: cannot queue the \(event) hook of session \(session.id) in \(folder): \(error)")
        }
        signalWake()
    }

    private func signalWake() { wake.withLockWakingAll { $0 += 1 } }

    /// Waits for a `signalWake` (taking it) or `seconds`.
    private func waitForWake(seconds: Double) {
        _ = wake.wait(until: Monotonic.now + seconds) { pending -> Bool? in
            guard pending > 0 else { return nil }
            pending -= 1
            return true
        }
    }

    /// Delivers what is queued for up to `seconds` more, then stops (what is left stays on disk).
    func finish(within seconds: Double) {
        state.withLock {
            $0.stopping = true
            $0.deadline = Monotonic.now + seconds
        }
        signalWake()
        _ = finished.wait { $0 ? true : nil }
    }

    private func queued() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
    }

    private func deliverAll() {
        var backoff = 0.5
        while true {
            let (stopping, deadline) = state.withLock { ($0.stopping, $0.deadline) }
            guard let head = queued().first else {
                if stopping { return }
                waitForWake(seconds: 1)
                continue
            }
            if stopping && Monotonic.now >= deadline { return }
            let path = folder + "/" + head
            guard let body = FileManager.default.contents(atPath: path) else { continue }
            let queuedAt = Double(head.prefix(19)).map { $0 / 1e9 } ?? Date().timeIntervalSince1970
            let delivery = String(head.dropFirst(27).dropLast(5))
            let signature = MessageSignature.hex(MessageSignature.hmacSHA256(key: secret, message: Array(body)))
            let answer = ServeHTTP.post(url, json: body, headers: ["X-Avgraph-Signature": "sha256=" + signature,
                                                                   "X-Avgraph-Delivery": delivery], timeout: 5)
            if answer.isSuccess {
                unlink(path)
                backoff = 0.5
                continue
            }
            if Date().timeIntervalSince1970 - queuedAt > Self.giveUpAfter {
                Terminal.err("avgraph serve: hook \(delivery) given up after \(Int(Self.giveUpAfter / 60)) minutes (\(answer.described))")
                unlink(path)
                continue
            }
            waitForWake(seconds: backoff)
            backoff = min(backoff * 2, Self.maxBackoff)
        }
    }

    /// UTC, ISO 8601 with milliseconds.
    static func time(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: date)
    }
}
