import AVGraph
import AVGraphNodes
import AVGraphTransport
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// One admitted publish and its run: the child `avgraph run TEMPLATE` (its own process, so a
/// run that fails or is killed takes only itself), the relay of the publisher's bytes into the
/// child's standard input, and the child's events read back for the hooks. A publisher that
/// returns with the same key while the run still waits (its source's `idle`) is relayed into
/// the same run.
final class ServeSession: Sendable {
    let identity: SessionIdentity
    let started: Date
    private let process: ProcessBox
    /// The child's standard input, for the relay's frames (`RelayPump`): a pipe channel on NIO's event loops.
    private let relay: Channel
    private let hooks: HookQueue?
    private let log: ServeLog
    private let state: Mutex<State>
    private let onExit: @Sendable (ServeSession) -> Void

    /// True while a child is being started (held across the spawn, so a thread waits its turn).
    private static let spawning = ConditionLock(false)

    private struct State {
        var publisher: PublisherArrival?
        var exited = false
        var publishes = 0
        /// The run's events so far, read.
        var report: RunReport
        /// The run's operator page (`--http`), once its `page` event has said it.
        var page: String?
        /// Of the run's exit and the end of its events, how many have come.
        var closing = 0
    }

    /// The child, asked for its pid and waited on, each once.
    private final class ProcessBox: Sendable {
        let process: Process
        init(_ p: Process) { process = p }
    }

    init(identity: SessionIdentity, executable: URL, arguments: [String], sinkPaths: [String: String], hooks: HookQueue?,
         log: ServeLog, onExit: @escaping @Sendable (ServeSession) -> Void) throws {
        self.identity = identity
        self.hooks = hooks
        self.log = log
        self.onExit = onExit
        state = Mutex(State(report: RunReport(sinkPaths: sinkPaths)))
        started = Date()
        // Pipes made close-on-exec and the child started under one lock: a pipe end another child
        // inherited (runs start from many threads) would keep this run's input, or its events,
        // open after this run is gone.
        _ = Self.spawning.wait { spawning -> Bool? in
            if spawning { return nil }
            spawning = true
            return true
        }
        defer { Self.spawning.withLockWakingAll { $0 = false } }
        var fds: [Int32] = [-1, -1], out: [Int32] = [-1, -1], err: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw MediaError("pipe: \(String(cString: strerror(errno)))") }
        guard pipe(&out) == 0, pipe(&err) == 0 else {
            for fd in fds + out + err where fd >= 0 { close(fd) }
            throw MediaError("pipe: \(String(cString: strerror(errno)))")
        }
        for fd in fds + out + err { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        do {
            relay = try NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton).takingOwnershipOfDescriptor(output: fds[1]).wait()
        } catch {
            // The input's write end is NIO's now, closed or not: closing it twice could close another's.
            for fd in [fds[0]] + out + err { close(fd) }
            throw MediaError("cannot relay into the run: \(error)")
        }
        let p = Process()
        p.executableURL = executable
        p.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment[PublisherSourceNode.environment] = "stdin"
        p.environment = environment
        p.standardInput = FileHandle(fileDescriptor: fds[0], closeOnDealloc: false)
        p.standardOutput = FileHandle(fileDescriptor: out[1], closeOnDealloc: false)
        p.standardError = FileHandle(fileDescriptor: err[1], closeOnDealloc: false)
        process = ProcessBox(p)
        // The session ends once the run has exited and its last event is read, whichever comes last.
        p.terminationHandler = { [self] _ in closing() }
        defer {
            close(fds[0])
            close(out[1])
            close(err[1])
        }
        do { try p.run() } catch {
            relay.close(promise: nil)
            close(out[0])
            close(err[0])
            throw MediaError("cannot start the run: \(error.localizedDescription)")
        }
        // The run's own warnings and summary go on to serve's stderr, as they are.
        LineReader.start(err[0], label: "serve-run-stderr", each: { [log] in log.write(String(decoding: $0, as: UTF8.self)) }, end: {})
        LineReader.start(out[0], label: "serve-run-events", each: { [self] in take(line: $0) }, end: { [self] in closing() })
    }

    var pid: Int32 { process.process.processIdentifier }
    var page: String? { state.withLock { $0.page } }
    var hasPublisher: Bool { state.withLock { $0.publisher != nil } }
    var hasExited: Bool { state.withLock { $0.exited } }

    /// Relays `arrival` into the run until it leaves; false when the run is gone already.
    func attach(_ arrival: PublisherArrival) -> Bool {
        let taken = state.withLock { s -> Bool in
            guard !s.exited, s.publisher == nil else { return false }
            s.publisher = arrival
            s.publishes += 1
            return true
        }
        guard taken else { return false }
        var peerIdentity = identity
        peerIdentity.peer = arrival.peer
        let me = peerIdentity
        post("publish", as: me, ["resumed": .bool(state.withLock { $0.publishes > 1 })])
        RelayPump(arrival, into: relay) { [self] seconds, bytes in
            state.withLock { $0.publisher = nil }
            post("unpublish", as: me, ["seconds": .number(seconds), "bytes": .int(bytes)])
        }.start()
        return true
    }

    /// Asks the run to finish (SIGTERM: it finalizes as `run` does).
    func signal(_ sig: Int32) {
        if !hasExited { kill(pid, sig) }
    }

    /// One line of the child's events (one typed `Event` a line): its page for the index, its
    /// files and uploads for the hooks.
    private func take(line: Data) {
        let outcomes = state.withLock { $0.report.take(line: String(decoding: line, as: UTF8.self)) }
        for outcome in outcomes {
            switch outcome {
            case .page(let url): state.withLock { $0.page = url }
            case .hook(let event, let fields): post(event, as: identity, fields)
            case .publisherGone(let peer): log.say("session \(identity.id): \(peer) left; the run has all it sent")
            case .ended: break
            }
        }
    }

    private func closing() {
        guard state.withLock({ s -> Bool in s.closing += 1; return s.closing == 2 }) else { return }
        ended(status: process.process.terminationStatus, signalled: process.process.terminationReason == .uncaughtSignal)
    }

    private func post(_ event: String, as who: SessionIdentity, _ fields: JSONObject = [:]) {
        hooks?.post(who.hook(event, fields), session: identity.id)
    }

    private func ended(status: Int32, signalled: Bool) {
        relay.close(promise: nil)
        let publisher = state.withLock { s -> PublisherArrival? in
            s.exited = true
            return s.publisher
        }
        publisher?.abandon()
        // Exit 3: the run ended with nothing recorded (a publisher that sent no media): not a failure of the run.
        if signalled || status != 0 && status != 3 {
            let why = signalled ? "killed by signal \(status)" : "exit status \(status)"
            log.say("session \(identity.id): the run ended: \(why)")
            post("failed", as: identity, signalled ? ["signal": .int(Int(status))] : ["status": .int(Int(status))])
        }
        onExit(self)
    }
}
