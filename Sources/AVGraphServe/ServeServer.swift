import AVGraph
import AVGraphNodes
import AVGraphTransport
import Foundation
import Synchronization

/// The running `serve`: one thread per listener handing its admitted publishers to a few
/// admission workers (a flood of arrivals waits in a bounded line, or is refused: it costs no
/// thread), each publish asked about (`--auth`) and then relayed into its session's run, a new
/// one or the one its key still holds.
public final class ServeServer: Sendable {
    public let configuration: ServeConfiguration
    private var log: ServeLog { configuration.log }
    private let state = Mutex(State())
    private let done = ConditionLock(false)
    private let admissions = Mutex<BoundedWorkers<PublisherArrival>?>(nil)
    /// The doors' refusal notes, taken on a timer (not a thread of its own).
    private let notes = Mutex<(any DispatchSourceTimer)?>(nil)

    private struct State {
        var sessions: [String: ServeSession] = [:]
        var admission = Admission<ServeSession>()
        /// The session a key's publisher is relayed into (`app/key`).
        var byKey: [String: ServeSession] = [:]
        var signals = 0
        var listenersDone = 0
    }

    public init(_ configuration: ServeConfiguration) { self.configuration = configuration }

    public var isStopping: Bool { state.withLock { $0.signals > 0 } }

    public func start() {
        let pool = BoundedWorkers<PublisherArrival>(workers: configuration.admissionWorkers, backlog: configuration.admissionBacklog,
                                                    name: "serve-admit") { [self] in admit($0) }
        admissions.withLock { $0 = pool }
        for door in configuration.doors {
            door.start()
            let t = Thread { [self] in
                while let arrival = door.next() {
                    if !pool.submit(arrival) {
                        log.warn("\(arrival.peer) (\(arrival.scheme)): refused: \(pool.backlog) publishers are waiting to be admitted")
                        arrival.abandon()
                    }
                }
                finishedListening()
            }
            t.name = "serve-door"
            t.start()
        }
        notes.withLock { notes in
            let timer = DispatchSource.makeTimerSource(queue: .global())
            timer.schedule(deadline: .now() + 0.25, repeating: 0.25)
            timer.setEventHandler { [self] in takeNotes() }
            timer.resume()
            notes = timer
        }
    }

    private func takeNotes() {
        for door in configuration.doors {
            for n in door.takeNotes() { log.warn(n) }
            for n in door.takeLinkChanges() { log.say(n) }
        }
    }

    /// Returns once stopped and every run has ended; the admission workers are gone too.
    public func waitUntilDone() {
        _ = done.wait { $0 ? true : nil }
        admissions.withLock { $0 }?.close()
    }

    public func stop(signal sig: Int32) {
        let (first, sessions) = state.withLock { s -> (Bool, [ServeSession]) in
            s.signals += 1
            return (s.signals == 1, Array(s.sessions.values))
        }
        if first {
            notes.withLock { $0?.cancel() }
            takeNotes()
            log.say("stopping: no new publisher; \(sessions.count) run(s) finalizing")
            // Each door's stop waits for its connections to close: off the signal's queue, all at once.
            for door in configuration.doors { DispatchQueue.global().async { door.stop() } }
        }
        for s in sessions { s.signal(first ? SIGTERM : sig) }
        checkDone()
    }

    private func finishedListening() {
        state.withLock { $0.listenersDone += 1 }
        checkDone()
    }

    private func checkDone() {
        let finished = state.withLock { $0.signals > 0 && $0.sessions.isEmpty && $0.listenersDone == configuration.doors.count }
        if finished { done.withLockWakingAll { $0 = true } }
    }

    /// On an admission worker: ask, then start the run (or resume the key's).
    private func admit(_ arrival: PublisherArrival) {
        let mapKey = Admission<ServeSession>.mapKey(app: arrival.app, key: arrival.key)
        let plan = state.withLock { s -> Admission<ServeSession>.Plan in
            let holder = s.byKey[mapKey].map { Admission<ServeSession>.Holder(session: $0, exited: $0.hasExited, publishing: $0.hasPublisher) }
            let stopping = s.signals > 0
            return s.admission.plan(mapKey, stopping: stopping, holder: holder)
        }
        switch plan {
        case .refuse(let why):
            log.warn("\(arrival.peer) (\(arrival.scheme)): refused: \(why)")
            arrival.abandon()
            return
        case .resume(let session):
            if session.attach(arrival) {
                log.say("\(arrival.peer) (\(arrival.scheme)): back in session \(session.identity.id)")
                return
            }
            // Its run ended just now: a new one.
            state.withLock { $0.admission.retake(mapKey) }
        case .ask: break
        }
        defer { state.withLock { $0.admission.done(mapKey) } }
        var overrides: [String] = []
        if let auth = configuration.auth {
            let question = AuthExchange.question(scheme: arrival.scheme, app: arrival.app, key: arrival.key, peer: arrival.peer, query: arrival.query)
            let answer = ServeHTTP.post(auth, json: question, timeout: AuthExchange.timeout)
            switch AuthExchange.verdict(status: answer.status, body: answer.body, described: answer.described) {
            case .refused(let why):
                log.warn("\(arrival.peer) (\(arrival.scheme)): refused by --auth (\(why))")
                arrival.abandon()
                return
            case .admitted(let sets): overrides = sets
            }
        }
        let id = "s" + String(UInt64.random(in: 0..<(1 << 40)), radix: 16)
        let run = RunArguments(template: configuration.template, session: id, key: arrival.key, app: arrival.app, start: Date(),
                               sets: configuration.sets, overrides: overrides, pages: configuration.pages, sinkPaths: configuration.sinkPaths)
        let identity = SessionIdentity(id: id, key: arrival.key, app: arrival.app, scheme: arrival.scheme, peer: arrival.peer)
        let session: ServeSession
        do {
            session = try ServeSession(identity: identity, executable: configuration.executable, arguments: run.arguments, sinkPaths: run.sinkPaths,
                                       hooks: configuration.hooks, log: log) { [self] in ended($0) }
        } catch {
            log.warn("\(arrival.peer) (\(arrival.scheme)): refused: \(error)")
            arrival.abandon()
            return
        }
        let stopping = state.withLock { s -> Bool in
            s.sessions[id] = session
            s.byKey[mapKey] = session
            return s.signals > 0
        }
        log.say("\(arrival.peer) (\(arrival.scheme)): session \(id) (run pid \(session.pid))")
        _ = session.attach(arrival)
        if stopping { session.signal(SIGTERM) }
    }

    /// The sessions whose run is alive, oldest first.
    public func liveSessions() -> [ServeIndex.Entry] {
        state.withLock { Array($0.sessions.values) }.sorted { $0.started < $1.started }.map { s in
            ServeIndex.Entry(session: s.identity.id, key: s.identity.key, app: s.identity.app, peer: s.identity.peer,
                             protocol: s.identity.scheme, publishing: s.hasPublisher, page: s.page)
        }
    }

    private func ended(_ session: ServeSession) {
        state.withLock { s in
            s.sessions[session.identity.id] = nil
            let mapKey = Admission<ServeSession>.mapKey(app: session.identity.app, key: session.identity.key)
            if s.byKey[mapKey] === session { s.byKey[mapKey] = nil }
        }
        checkDone()
    }
}
