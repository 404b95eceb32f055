import AVGraph
import AVGraphNodes
import Foundation
import Synchronization

/// The running `serve`: one thread per listener taking its admitted publishers, each publish
/// asked about (`--auth`) on a thread of its own and then relayed into its session's run, a
/// new one or the one its key still holds.
final class ServeServer: Sendable {
    static let authTimeout = 2.0

    let template: String
    let doors: [PublisherDoor]
    let auth: URL?
    let hooks: ServeHooks?
    /// File sinks' paths with their placeholders, by node.
    let sinkPaths: [String: String]
    /// Each run serves its operator page on loopback (for `--http`'s index).
    let pages: Bool
    /// `--set` for every run, placeholders and all.
    let sets: [String]
    private let executable: URL
    private let state = Mutex(State())
    private let done = ConditionLock(false)

    private struct State {
        var sessions: [String: ServeSession] = [:]
        /// The session a key's publisher is relayed into (`app/key`).
        var byKey: [String: ServeSession] = [:]
        /// Publishes being asked about, by key: a second one meanwhile is refused.
        var asking: Set<String> = []
        var signals = 0
        var listenersDone = 0
    }

    init(template: String, doors: [PublisherDoor], auth: URL?, hooks: ServeHooks?, sinkPaths: [String: String], pages: Bool, sets: [String]) {
        self.pages = pages
        self.sets = sets
        self.template = template
        self.doors = doors
        self.auth = auth
        self.hooks = hooks
        self.sinkPaths = sinkPaths
        executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    }

    var isStopping: Bool { state.withLock { $0.signals > 0 } }

    func start() {
        for door in doors {
            door.start()
            let t = Thread { [self] in
                while let arrival = door.next() {
                    let t = Thread { [self] in admit(arrival) }
                    t.name = "serve-admit"
                    t.start()
                }
                finishedListening()
            }
            t.name = "serve-door"
            t.start()
        }
        let notes = Thread { [self] in
            while !isStopping {
                for door in doors { for n in door.takeNotes() { Terminal.err("avgraph serve: warning: \(n)") } }
                Thread.sleep(forTimeInterval: 0.25)
            }
        }
        notes.name = "serve-notes"
        notes.start()
    }

    /// Returns once stopped and every run has ended.
    func waitUntilDone() { _ = done.wait { $0 ? true : nil } }

    func stop(signal sig: Int32) {
        let (first, sessions) = state.withLock { s -> (Bool, [ServeSession]) in
            s.signals += 1
            return (s.signals == 1, Array(s.sessions.values))
        }
        if first {
            Terminal.err("avgraph serve: stopping: no new publisher; \(sessions.count) run(s) finalizing")
            // Each door's stop waits for its connections to close: off the signal's queue, all at once.
            for door in doors { Thread { door.stop() }.start() }
        }
        for s in sessions { s.signal(first ? SIGTERM : sig) }
        checkDone()
    }

    private func finishedListening() {
        state.withLock { $0.listenersDone += 1 }
        checkDone()
    }

    private func checkDone() {
        let finished = state.withLock { $0.signals > 0 && $0.sessions.isEmpty && $0.listenersDone == doors.count }
        if finished { done.withLockWakingAll { $0 = true } }
    }

    private func admit(_ arrival: PublisherArrival) {
        let mapKey = arrival.app + "/" + arrival.key
        // A key whose run still waits takes its publisher back; one whose publisher is live, or
        // being asked about, takes no second.
        enum Plan { case refuse(String), resume(ServeSession), ask }
        let plan = state.withLock { s -> Plan in
            if s.signals > 0 { return .refuse("serve is stopping") }
            if s.asking.contains(mapKey) { return .refuse("another publisher with this key is being admitted") }
            if let existing = s.byKey[mapKey], !existing.hasExited {
                return existing.hasPublisher ? .refuse("another publisher is live with this key") : .resume(existing)
            }
            s.asking.insert(mapKey)
            return .ask
        }
        switch plan {
        case .refuse(let why):
            Terminal.err("avgraph serve: warning: \(arrival.peer) (\(arrival.scheme)): refused: \(why)")
            arrival.abandon()
            return
        case .resume(let session):
            if session.attach(arrival) {
                Terminal.err("avgraph serve: \(arrival.peer) (\(arrival.scheme)): back in session \(session.identity.id)")
                return
            }
            // Its run ended just now: a new one.
            state.withLock { _ = $0.asking.insert(mapKey) }
        case .ask: break
        }
        defer { state.withLock { _ = $0.asking.remove(mapKey) } }
        var overrides: [String] = []
        if let auth {
            switch ask(auth, arrival) {
            case .refused(let why):
                Terminal.err("avgraph serve: warning: \(arrival.peer) (\(arrival.scheme)): refused by --auth (\(why))")
                arrival.abandon()
                return
            case .admitted(let sets): overrides = sets
            }
        }
        let start = Date()
        let id = "s" + String(UInt64.random(in: 0..<(1 << 40)), radix: 16)
        let values = ["key": arrival.key, "app": arrival.app.isEmpty ? "_" : arrival.app, "session": id, "start": TemplatePlaceholders.stamp(start)]
        var arguments = ["run", template, "--name", id, "--events", "json"]
        for name in TemplatePlaceholders.names { arguments += ["--placeholder", "\(name)=\(values[name]!)"] }
        for s in sets { arguments += ["--set", TemplatePlaceholders.fill(s, values)] }
        for s in overrides { arguments += ["--set", s] }
        if pages { arguments += ["--http", "127.0.0.1:0"] }
        let identity = ServeSession.Identity(id: id, key: arrival.key, app: arrival.app, scheme: arrival.scheme, peer: arrival.peer)
        var paths = sinkPaths
        for s in sets + overrides {
            guard let o = OptionOverride(parsing: s), o.option == "path", paths[o.node] != nil else { continue }
            paths[o.node] = o.value.hasPrefix("/") ? o.value : ((template as NSString).deletingLastPathComponent as NSString).appendingPathComponent(o.value)
        }
        paths = paths.mapValues { TemplatePlaceholders.fill($0, values) }
        let session: ServeSession
        do {
            session = try ServeSession(identity: identity, executable: executable, arguments: arguments, sinkPaths: paths, hooks: hooks) { [self] in
                ended($0)
            }
        } catch {
            Terminal.err("avgraph serve: warning: \(arrival.peer) (\(arrival.scheme)): refused: \(error)")
            arrival.abandon()
            return
        }
        let stopping = state.withLock { s -> Bool in
            s.sessions[id] = session
            s.byKey[mapKey] = session
            return s.signals > 0
        }
        Terminal.err("avgraph serve: \(arrival.peer) (\(arrival.scheme)): session \(id) (run pid \(session.pid))")
        _ = session.attach(arrival)
        if stopping { session.signal(SIGTERM) }
    }

    /// The sessions whose run is alive, oldest first.
    func liveSessions() -> [ServeIndex.Entry] {
        state.withLock { Array($0.sessions.values) }.sorted { $0.started < $1.started }.map { s in
            ServeIndex.Entry(session: s.identity.id, key: s.identity.key, app: s.identity.app, peer: s.identity.peer,
                             protocol: s.identity.scheme, publishing: s.hasPublisher, page: s.page)
        }
    }

    private func ended(_ session: ServeSession) {
        state.withLock { s in
            s.sessions[session.identity.id] = nil
            let mapKey = session.identity.app + "/" + session.identity.key
            if s.byKey[mapKey] === session { s.byKey[mapKey] = nil }
        }
        checkDone()
    }

    private enum Verdict { case admitted([String]), refused(String) }

    /// The backend's answer, failing closed: no 2xx within 2 s is a refusal.
    private func ask(_ url: URL, _ arrival: PublisherArrival) -> Verdict {
        let question: [String: String] = ["action": "publish", "protocol": arrival.scheme, "app": arrival.app, "key": arrival.key,
                                          "peer": arrival.peer, "query": arrival.query]
        guard let body = try? JSONSerialization.data(withJSONObject: question, options: [.sortedKeys]) else { return .refused("unencodable") }
        let answer = ServeHTTP.post(url, json: body, timeout: Self.authTimeout)
        guard answer.isSuccess else { return .refused(answer.described) }
        guard !answer.body.isEmpty, let object = try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any],
              let sets = object["set"] as? [String: Any] else { return .admitted([]) }
        return .admitted(sets.keys.sorted().map { "\($0)=\(Self.text(sets[$0]!))" })
    }

    /// A JSON value as `--set` takes it.
    private static func text(_ value: Any) -> String {
        switch value {
        case let s as String: return s
        // JSON's true and false arrive as NSNumbers of type char.
        case let n as NSNumber: return String(cString: n.objCType) == "c" ? (n.boolValue ? "true" : "false") : n.stringValue
        default:
            return (try? JSONSerialization.data(withJSONObject: value)).map { String(decoding: $0, as: UTF8.self) } ?? "\(value)"
        }
    }
}
