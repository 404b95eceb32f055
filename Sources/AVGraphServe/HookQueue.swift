import AVGraph
import Foundation
import Synchronization

/// `avgraph serve --hooks URL`: each event one JSON body, signed (`X-Avgraph-Signature:
/// sha256=HEX`, HMAC-SHA256 of the body with the secret), written to a queue folder first
/// (beside the recordings) and POSTed from there, each session's oldest first. Sessions are lanes
/// of their own: a receiver that fails one session's event (retried with backoff, each event for
/// 10 minutes) holds back that session only, while every other session's events go on. One that
/// comes back, or a `serve` that restarts, delivers what waited. A queued file that cannot be read
/// as a JSON object is moved aside (`unreadable/`) with a warning, never retried. Media never
/// waits on it: `post` only writes a file. Deliveries are asynchronous: no thread per session.
public final class HookQueue: Sendable {
    public static let giveUpAfter = 600.0
    public static let firstBackoff = 0.5
    public static let maxBackoff = 5.0

    /// One attempt's outcome: delivered (a 2xx), else why not.
    public struct Outcome: Sendable {
        public var delivered: Bool
        public var described: String
        public init(delivered: Bool, described: String) { self.delivered = delivered; self.described = described }
    }
    /// POSTs `body` with `headers`, calling back once with the outcome (on any thread).
    public typealias Transport = @Sendable (_ body: Data, _ headers: [String: String], _ done: @escaping @Sendable (Outcome) -> Void) -> Void

    public let folder: String
    private let secret: [UInt8]
    private let transport: Transport
    private let log: ServeLog
    private let state = Mutex(State())
    /// True when no lane has a delivery in flight or waiting, and nothing is left to send (or the
    /// stop's deadline has passed).
    private let idle = ConditionLock(true)

    private struct Lane {
        var files: [HookFile] = []
        /// A delivery in flight, or its retry waiting.
        var busy = false
        var backoff = HookQueue.firstBackoff
    }

    private struct State {
        var lanes: [String: Lane] = [:]
        var counter = 0
        var started = false
        var deadline: Double?
    }

    public init(folder: String, secret: [UInt8], log: ServeLog = .stderr, transport: @escaping Transport) throws {
        self.folder = folder
        self.secret = secret
        self.transport = transport
        self.log = log
        do { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) } catch {
            throw MediaError("--hooks-queue \(folder): cannot make the folder: \(error.localizedDescription)")
        }
    }

    /// POSTing to `url` with `ServeHTTP` (5 s for each attempt).
    public convenience init(url: URL, secret: [UInt8], folder: String, log: ServeLog = .stderr) throws {
        try self.init(folder: folder, secret: secret, log: log) { body, headers, done in
            ServeHTTP.post(url, json: body, headers: headers, timeout: 5) { answer in
                done(Outcome(delivered: answer.isSuccess, described: answer.described))
            }
        }
    }

    /// Delivers what an earlier serve left in the folder, and from now on what is posted.
    public func start() {
        let found = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).compactMap(HookFile.init(name:))
        let lanes = state.withLock { s -> [String] in
            s.started = true
            for file in found where !(s.lanes[file.session]?.files.contains(file) ?? false) {
                s.lanes[file.session, default: Lane()].files.append(file)
            }
            for key in s.lanes.keys { s.lanes[key]?.files.sort() }
            return Array(s.lanes.keys)
        }
        for lane in lanes { kick(lane) }
        checkIdle()
    }

    /// Queues one event of `session`: `body` is the whole hook (HookBody).
    public func post(_ body: JSONObject, session: String) {
        let data = ServeJSON.encode(body)
        let n = state.withLock { s -> Int in s.counter += 1; return s.counter }
        let file = HookFile(nanoseconds: UInt64(Date().timeIntervalSince1970 * 1e9), counter: n, session: session,
                            delivery: UUID().uuidString.lowercased())
        let path = folder + "/" + file.name
        do {
            try data.write(to: URL(fileURLWithPath: path + ".tmp"))
            guard rename(path + ".tmp", path) == 0 else { throw MediaError(String(cString: strerror(errno))) }
        } catch {
            let event = body["event"]?.text ?? "?"
            log.write("avgraph serve: cannot queue the \(event) hook of session \(session) in \(folder): \(error)")
            return
        }
        state.withLock { s in
            s.lanes[file.session, default: Lane()].files.append(file)
            s.lanes[file.session]?.files.sort()
        }
        checkIdle()
        kick(file.session)
    }

    /// Delivers what is queued for up to `seconds` more, then stops (what is left stays on disk).
    public func finish(within seconds: Double) {
        let deadline = Monotonic.now + seconds
        state.withLock { $0.deadline = deadline }
        checkIdle()
        // Past the deadline a delivery in flight still has its own timeout, a retry its backoff.
        _ = idle.wait(until: deadline + 6) { $0 ? true : nil }
    }

    /// Events waiting, by lane (a session, "" for an older serve's).
    public var waiting: [String: Int] { state.withLock { s in s.lanes.mapValues(\.files.count).filter { $0.value > 0 } } }

    /// Sends the lane's oldest event unless one of its is in flight or waiting to be retried.
    private func kick(_ lane: String) {
        let head = state.withLock { s -> HookFile? in
            guard s.started, let l = s.lanes[lane], !l.busy, let head = l.files.first else { return nil }
            if let deadline = s.deadline, Monotonic.now >= deadline { return nil }
            s.lanes[lane]?.busy = true
            return head
        }
        guard let head else { return checkIdle() }
        let path = folder + "/" + head.name
        guard let body = FileManager.default.contents(atPath: path), ServeJSON.object(body) != nil else {
            moveAside(head)
            return settle(lane, head, removed: true)
        }
        let signature = MessageSignature.hex(MessageSignature.hmacSHA256(key: secret, message: Array(body)))
        transport(body, ["X-Avgraph-Signature": "sha256=" + signature, "X-Avgraph-Delivery": head.delivery]) { [self] outcome in
            if outcome.delivered {
                unlink(path)
                return settle(lane, head, removed: true)
            }
            if Date().timeIntervalSince1970 - head.queuedAt > Self.giveUpAfter {
                log.write("avgraph serve: hook \(head.delivery) given up after \(Int(Self.giveUpAfter / 60)) minutes (\(outcome.described))")
                unlink(path)
                return settle(lane, head, removed: true)
            }
            retry(lane, head)
        }
    }

    private func retry(_ lane: String, _ head: HookFile) {
        let wait = state.withLock { s -> Double? in
            guard var l = s.lanes[lane] else { return nil }
            if let deadline = s.deadline, Monotonic.now >= deadline { return nil }
            let wait = l.backoff
            l.backoff = min(l.backoff * 2, Self.maxBackoff)
            s.lanes[lane] = l
            return wait
        }
        guard let wait else { return settle(lane, head, removed: false) }
        DispatchQueue.global().asyncAfter(deadline: .now() + wait) { [self] in settle(lane, head, removed: false) }
    }

    /// The lane's delivery is over (its head sent, given up or moved aside, or to be tried again):
    /// its next one goes.
    private func settle(_ lane: String, _ head: HookFile, removed: Bool) {
        state.withLock { s in
            guard var l = s.lanes[lane] else { return }
            l.busy = false
            if removed {
                l.files.removeAll { $0 == head }
                l.backoff = Self.firstBackoff
            }
            s.lanes[lane] = l.files.isEmpty ? nil : l
        }
        kick(lane)
    }

    private func moveAside(_ file: HookFile) {
        let aside = folder + "/unreadable"
        try? FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true)
        if rename(folder + "/" + file.name, aside + "/" + file.name) != 0 { unlink(folder + "/" + file.name) }
        log.warn("hook \(file.delivery) of session \(file.session) is not a JSON object: moved aside to \(aside), not sent")
    }

    /// Reads the lanes with `idle` held, so two callers cannot leave an older answer last.
    private func checkIdle() {
        idle.withLockWakingAll { idle in
            idle = state.withLock { s -> Bool in
                if s.lanes.values.contains(where: \.busy) { return false }
                if let deadline = s.deadline, Monotonic.now >= deadline { return true }
                return s.lanes.values.allSatisfy { $0.files.isEmpty }
            }
        }
    }
}
