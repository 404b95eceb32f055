import AVGraph
import AVGraphNodes
import Foundation
import Synchronization

/// One admitted publish and its run: the child `avgraph run TEMPLATE` (its own process, so a
/// run that fails or is killed takes only itself), the relay of the publisher's bytes into the
/// child's standard input, and the child's events read back for the hooks. A publisher that
/// returns with the same key while the run still waits (its source's `idle`) is relayed into
/// the same run.
final class ServeSession: Sendable {
    struct Identity: Sendable {
        var id: String, key: String, app: String, scheme: String, peer: String
    }

    let identity: Identity
    let started: Date
    private let process: ProcessBox
    /// The child's standard input: the relay's frames.
    private let relay: Int32
    private let hooks: ServeHooks?
    /// File sinks' paths by node (the template filled in): the `recording` hook before the file
    /// sink says it itself.
    private let sinkPaths: [String: String]
    private let state = Mutex(State())
    private let onExit: @Sendable (ServeSession) -> Void

    /// True while a child is being started (held across the spawn, so a thread waits its turn).
    private static let spawning = ConditionLock(false)

    private struct State {
        var publisher: PublisherArrival?
        var exited = false
        var sawRecording = false
        var publishes = 0
        /// The run's operator page (`--http`), once it has said it.
        var page: String?
    }

    /// The child, asked for its pid and waited on, each once.
    private final class ProcessBox: Sendable {
        let process: Process
        init(_ p: Process) { process = p }
    }

    init(identity: Identity, executable: URL, arguments: [String], sinkPaths: [String: String], hooks: ServeHooks?,
         onExit: @escaping @Sendable (ServeSession) -> Void) throws {
        self.identity = identity
        self.hooks = hooks
        self.sinkPaths = sinkPaths
        self.onExit = onExit
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
        relay = fds[1]
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
        defer {
            close(fds[0])
            close(out[1])
            close(err[1])
        }
        do { try p.run() } catch {
            close(fds[1])
            close(out[0])
            close(err[0])
            throw MediaError("cannot start the run: \(error.localizedDescription)")
        }
        let reader = FileHandle(fileDescriptor: out[0], closeOnDealloc: true)
        let diagnostics = FileHandle(fileDescriptor: err[0], closeOnDealloc: true)
        let diagnosticsThread = Thread { [self] in readLines(diagnostics) { passOn($0) } }
        diagnosticsThread.name = "serve-run-stderr"
        diagnosticsThread.start()
        let t = Thread { [self] in
            readEvents(reader)
            process.process.waitUntilExit()
            ended(status: process.process.terminationStatus, signalled: process.process.terminationReason == .uncaughtSignal)
        }
        t.name = "serve-run"
        t.start()
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
        hooks?.post("publish", me, ["resumed": state.withLock { $0.publishes > 1 }])
        let t = Thread { [self] in relay(arrival, as: me) }
        t.name = "serve-relay"
        t.start()
        return true
    }

    private func relay(_ arrival: PublisherArrival, as me: Identity) {
        let start = PublisherRelayFrame.Start(peer: arrival.peer, key: arrival.key, app: arrival.app, format: arrival.format)
        var ok = (try? JSONEncoder().encode(start)).map { send(PublisherRelayFrame.begin, Array($0)[...]) } ?? false
        var chunk = [UInt8](repeating: 0, count: PublisherRelayFrame.maxData)
        var bytes = 0
        let began = Monotonic.now
        while ok {
            let n = chunk.withUnsafeMutableBytes { arrival.read(into: $0) }
            if n == 0 { break }
            bytes += n
            ok = send(PublisherRelayFrame.data, chunk[..<n])
        }
        if ok { ok = send(PublisherRelayFrame.end, []) }
        // The run is gone (its input broke): the publisher's connection goes too.
        if !ok { arrival.abandon() }
        state.withLock { $0.publisher = nil }
        hooks?.post("unpublish", me, ["seconds": ((Monotonic.now - began) * 1000).rounded() / 1000, "bytes": bytes])
    }

    private func send(_ kind: UInt8, _ body: ArraySlice<UInt8>) -> Bool {
        var frame = PublisherRelayFrame.header(kind, length: body.count)
        frame += body
        return frame.withUnsafeBytes { all in
            var off = 0
            while off < all.count {
                let n = write(relay, all.baseAddress! + off, all.count - off)
                if n > 0 { off += n } else if n < 0 && errno == EINTR { continue } else { return false }
            }
            return true
        }
    }

    /// Asks the run to finish (SIGTERM: it finalizes as `run` does).
    func signal(_ sig: Int32) {
        if !hasExited { kill(pid, sig) }
    }

    /// The child's events, one JSON object a line: its `recording` events (and, from a build
    /// whose file sink does not say them, its `eos` sinks) become hooks.
    private func readEvents(_ handle: FileHandle) {
        readLines(handle) { line in
            if let event = try? JSONSerialization.jsonObject(with: line) as? [String: Any] { take(event) }
        }
    }

    private func readLines(_ handle: FileHandle, _ each: (Data) -> Void) {
        var partial = Data()
        while true {
            let data = handle.availableData
            if data.isEmpty { break }
            partial.append(data)
            while let nl = partial.firstIndex(of: 10) {
                each(partial[partial.startIndex..<nl])
                partial.removeSubrange(partial.startIndex...nl)
            }
        }
    }

    /// The run's own warnings and summary go on to serve's stderr; its operator page's address
    /// (`--http 127.0.0.1:0`) is kept for the index.
    private func passOn(_ line: Data) {
        let text = String(decoding: line, as: UTF8.self)
        if let r = text.range(of: "operator page: ") {
            state.withLock { $0.page = String(text[r.upperBound...]).trimmingCharacters(in: .whitespaces) }
        }
        Terminal.err(text)
    }

    private func take(_ event: [String: Any]) {
        switch event["event"] as? String {
        case "recording":
            state.withLock { $0.sawRecording = true }
            var fields = event
            fields["event"] = nil
            fields["wall"] = nil
            hooks?.post("recording", identity, fields)
        case "eos":
            guard !state.withLock({ $0.sawRecording }) else { return }
            for sink in event["sinks"] as? [[String: Any]] ?? [] {
                guard let node = sink["node"] as? String, let path = sinkPaths[node] else { continue }
                hooks?.post("recording", identity, ["node": node, "path": path, "part": 1, "seconds": sink["media_duration"] ?? 0,
                                                    "bytes": sink["bytes"] ?? 0, "frames": sink["frames"] ?? 0, "finalized": true])
            }
        case "upload", "uploaded":
            var fields = event
            fields["event"] = nil
            fields["wall"] = nil
            hooks?.post("upload", identity, fields)
        default: break
        }
    }

    private func ended(status: Int32, signalled: Bool) {
        close(relay)
        let publisher = state.withLock { s -> PublisherArrival? in
            s.exited = true
            return s.publisher
        }
        publisher?.abandon()
        // Exit 3: the run ended with nothing recorded (a publisher that sent no media): not a failure of the run.
        if signalled || status != 0 && status != 3 {
            let why = signalled ? "killed by signal \(status)" : "exit status \(status)"
            Terminal.err("avgraph serve: session \(identity.id): the run ended: \(why)")
            hooks?.post("failed", identity, signalled ? ["signal": Int(status)] : ["status": Int(status)])
        }
        onExit(self)
    }
}
