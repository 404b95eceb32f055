import AVGraph
import Foundation
import Synchronization

/// Media sent by another process over a unix socket, in the framing of docs/INGEST.md (a
/// broadcast extension handing its sample buffers to a host process). One producer at a time;
/// a producer that disconnects and comes back continues the output timeline (its timestamps
/// are anchored again where it reconnects; `fps` covers the gap). A malformed message closes
/// that connection with a warning; the pipeline goes on and waits for the next producer. An
/// `end` message ends the source (the broadcast finished).
public final class SocketSourceNode: Source, Node, LiveSource {
    public static let typeName = "socket"
    public static let summary = "media from another process over a unix socket (docs/INGEST.md)"
    public static let outputs = [
        PadSpec("video", [.rawVideo], doc: "received pictures (their own size and layout, orientation tag), pts in µs"),
        PadSpec("app", [.rawAudio], doc: "received app audio, at audio-rate/audio-channels"),
        PadSpec("mic", [.rawAudio], doc: "received microphone audio, at audio-rate/audio-channels"),
    ]
    static let path = Setting<String?>.string("path",
        doc: "unix socket to listen on; default PIPELINE.NODE.ingest.sock in the private runtime folder (docs/INGEST.md). "
            + "Made owner-only; only this user's processes may connect; an existing file that is not a stale socket of this user is refused")
    static let idleWarning = Setting.duration("idle-warning", 0.1...3600, default: "5s",
        doc: "while no producer is connected, warn this often that the source is waiting")
    static let drop = IngestOptions.drop(default: .oldest)
    public static let options = [path.spec, idleWarning.spec] + IngestOptions.common(drop: drop)
    public static let events: [any NodeEvent.Type] = [ListeningEvent.self, ProducerEvent.self]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        if let path = n.path(Self.path), path.isEmpty { throw NegotiationError("empty path", option: "path", hint: "leave 'path' out for the default") }
        if let path = n.path(Self.path), path.utf8.count >= 108 {
            throw NegotiationError("socket path is longer than 107 bytes", option: "path", hint: "use a shorter path, e.g. under /tmp")
        }
        return try IngestOptions.negotiate(n)
    }

    /// `PIPELINE.NODE.ingest.sock` in the private runtime folder, where `avgraph feed PIPELINE` looks.
    static func defaultPath(_ setup: NodeSetup) throws -> String {
        let pipeline = setup.pipelineName.isEmpty ? "avgraph" : setup.pipelineName
        do { return try PrivateSocket.defaultPath(ingestName(pipeline: pipeline, node: setup.name)) } catch let e as PrivateSocket.Failure {
            throw MediaError("\(setup.name): \(e.description)")
        }
    }

    /// The socket's name in the runtime folder (without `.sock`).
    public static func ingestName(pipeline: String, node: String) -> String { "\(pipeline).\(node).ingest" }

    let hub: IngestHub
    let emitter: IngestEmitter
    let receiver: SocketReceiver
    let duration: Double?
    let idleWarning: Double
    var announced = false
    var lastWarning = 0.0

    public init(_ setup: NodeSetup) throws {
        hub = IngestOptions.hub(setup, drop: Self.drop)
        emitter = IngestEmitter(hub: hub, outputs: setup.outputs)
        duration = setup.duration
        idleWarning = setup[Self.idleWarning]
        receiver = try SocketReceiver(path: setup.path(Self.path) ?? Self.defaultPath(setup), hub: hub)
        receiver.start()
    }

    override public func produce(_ out: Outlet) throws -> Bool {
        if !announced {
            announced = true
            lastWarning = out.clock
            out.event(ListeningEvent(path: receiver.path))
        }
        report(out)
        if let duration, out.clock >= duration { return false }
        let warnAt = receiver.isConnected ? nil : Monotonic.now + max(0, lastWarning + idleWarning - out.clock)
        switch emitter.next(out, duration: duration, deadline: warnAt) {
        case .item(let item): try emitter.emit(item, out)
        case .woken, .deadline:
            try emitter.idle(out)
            if !receiver.isConnected { try emitter.producerLeft(out) }
            if !receiver.isConnected && out.clock - lastWarning >= idleWarning {
                lastWarning = out.clock
                out.warning("waiting for a producer on \(receiver.path)")
            }
        case .ended: return false
        }
        if receiver.isConnected { lastWarning = out.clock }
        return !out.reachedEnd
    }

    private func report(_ out: Outlet) {
        for note in receiver.takeNotes() {
            if let producer = note.producer { out.event(producer) }
            if note.warning { out.warning(note.message) }
        }
    }

    override public func finish(_ out: Outlet) throws {
        receiver.stop()
        report(out)
        hub.finish()
        try emitter.finish(out)
    }

    override public func abort() {
        receiver.stop()
        hub.finish()
    }
}

/// The socket's reader thread: accepts producers, reads whole messages without blocking the
/// pipeline (non-blocking reads; poll(2) wakes on data, a producer or `stop`), hands them to the hub.
// @unchecked: the connection, framing buffers and counters (the `var`s) are the reader thread's
// alone; what other threads read is in `shared`.
final class SocketReceiver: @unchecked Sendable {
    struct Note: Sendable { var warning: Bool; var message: String; var producer: ProducerEvent? }

    let path: String
    private let hub: IngestHub
    private var listener: Int32
    private let identity: [UInt]
    private var connection: Int32 = -1
    private var session = 0
    private struct Shared {
        var notes: [Note] = []
        var stopped = false
        var connected = false
    }
    private let shared = Mutex(Shared())
    private let stopEvent = StopEvent()
    /// Whether the reader thread started, and whether it is done.
    private let thread = ConditionLock((started: false, done: false))

    private var header = [UInt8](repeating: 0, count: IngestFraming.headerSize)
    private var headerFill = 0
    private var current: IngestFraming.Header?
    private var payload = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 64)
    private var payloadCapacity = 1
    private var payloadFill = 0
    private var messages = 0

    init(path: String, hub: IngestHub) throws {
        self.path = path
        self.hub = hub
        listener = try UnixSocket.listen(path: path)
        identity = PrivateSocket.identity(of: path)
    }

    deinit { payload.deallocate() }

    func start() {
        thread.withLock { $0.started = true }
        let t = Thread { [self] in
            loop()
            thread.withLockWakingAll { $0.done = true }
        }
        t.name = "socket-reader"
        t.start()
    }

    func stop() {
        let first = shared.withLock { s in
            defer { s.stopped = true }
            return !s.stopped
        }
        stopEvent.signal()
        if first { _ = thread.wait { $0.started && !$0.done ? nil : true } }
    }

    var isConnected: Bool { shared.withLock { $0.connected } }
    private var isStopped: Bool { shared.withLock { $0.stopped } }

    func takeNotes() -> [Note] {
        shared.withLock { s in
            defer { s.notes.removeAll() }
            return s.notes
        }
    }

    private func note(_ warning: Bool, _ message: String, _ producer: ProducerEvent? = nil) {
        shared.withLock { $0.notes.append(Note(warning: warning, message: message, producer: producer)) }
        hub.queue.wake()
    }

    private func loop() {
        while !isStopped {
            let fds = connection >= 0 ? [listener, connection] : [listener]
            let ready = UnixSocket.readable(fds, orStop: stopEvent)
            if ready.isEmpty { break }
            if ready[0], let c = UnixSocket.accept(listener, refused: { uid in
                note(true, "refused a connection from another user (uid \(uid)): only this user's processes may send")
            }) {
                if connection >= 0 { drop("a new producer connected; the previous connection was closed", warning: true) }
                connection = c
                session += 1
                messages = 0
                headerFill = 0
                current = nil
                shared.withLock { $0.connected = true }
                note(false, "producer connected", .init(state: .connected, session: session, message: "producer connected"))
            }
            if connection >= 0 && ready.count > 1 && ready[1] { readAvailable() }
        }
        if connection >= 0 { drop("source stopped", warning: false) }
        close(listener)
        PrivateSocket.remove(path: path, identity: identity)
    }

    private func drop(_ reason: String, warning: Bool) {
        close(connection)
        connection = -1
        current = nil
        headerFill = 0
        shared.withLock { $0.connected = false }
        note(warning, reason, .init(state: .disconnected, session: session, messages: messages, message: reason))
    }

    /// Reads what the producer has sent, a few MB at most per call.
    private func readAvailable() {
        var budget = 16 << 20
        while budget > 0 && connection >= 0 {
            let n: Int
            if let h = current {
                n = UnixSocket.read(connection, into: payload + payloadFill, count: h.payloadSize - payloadFill)
            } else {
                n = header.withUnsafeMutableBytes { UnixSocket.read(connection, into: $0.baseAddress! + headerFill, count: IngestFraming.headerSize - headerFill) }
            }
            if n == -1 { return }
            if n == 0 { drop(current == nil && headerFill == 0 ? "producer disconnected" : "producer disconnected mid-message", warning: false); return }
            if n < 0 { drop("read error: \(String(cString: strerror(errno)))", warning: true); return }
            budget -= n
            if let h = current {
                payloadFill += n
                if payloadFill == h.payloadSize {
                    current = nil
                    headerFill = 0
                    deliver(h)
                }
            } else {
                headerFill += n
                guard headerFill == IngestFraming.headerSize else { continue }
                do {
                    let h = try header.withUnsafeBytes { try IngestFraming.parse($0) }
                    if h.payloadSize == 0 {
                        headerFill = 0
                        deliver(h)
                    } else {
                        if h.payloadSize > payloadCapacity {
                            payload.deallocate()
                            payload = .allocate(byteCount: h.payloadSize, alignment: 64)
                            payloadCapacity = h.payloadSize
                        }
                        payloadFill = 0
                        current = h
                    }
                } catch {
                    drop("malformed message from the producer (\(error)); connection closed", warning: true)
                    return
                }
            }
        }
    }

    private func deliver(_ h: IngestFraming.Header) {
        messages += 1
        let time = Double(h.timestamp) / 1e6
        switch h.type {
        case .video:
            let format = PushPixelFormat(rawValue: h.format)!
            guard let layout = PixelLayout(format.av) else { return }
            var planes: [PlaneCopy.Plane] = []
            var offset = 0
            for (rowBytes, rows) in PlaneCopy.packedPlaneSizes(layout: layout, width: h.a, height: h.b) {
                planes.append(PlaneCopy.Plane(base: UnsafeRawPointer(payload + offset), stride: rowBytes))
                offset += rowBytes * rows
            }
            _ = hub.pushVideo(format: format, width: h.a, height: h.b, planes: planes, time: time, orientation: h.orientation,
                              session: session)
        case .app, .mic:
            _ = hub.pushAudio(pad: h.type == .app ? 1 : 2, bytes: payload, byteCount: h.payloadSize,
                              format: PushSampleFormat(rawValue: h.format)!, bigEndian: h.bigEndian, rate: h.a, channels: h.b,
                              time: time, session: session)
        case .end:
            note(false, "producer ended the broadcast", .init(state: .ended, session: session, message: "producer ended the broadcast"))
            hub.finish()
        case .privacy:
            let card = h.payloadSize > 0 ? String(decoding: UnsafeRawBufferPointer(start: payload, count: h.payloadSize), as: UTF8.self) : nil
            if !hub.pushPrivacy(on: h.a == 1, card: card, time: time) {
                note(true, "privacy switch from the producer refused (card name not A-Z a-z 0-9 - _, or too many pending)")
            }
        }
    }
}
