import Foundation

// The run's events, one typed value each: `--events json` prints them one JSON object a line,
// the control socket's `watch` streams the same lines, the CLI's status line and stderr messages
// read them, and an embedding app gets them as `Event` values (`EventLog.stream()`/`onEvent`).
// docs/events.schema.json describes the lines; docs/EVENTS.md lists them.
//
// Adding an event kind (a small change in three places, checked by EventSchemaTests):
//  1. a payload struct in EventKinds.swift (Codable, Sendable, `static let eventName = "..."`,
//     snake_case JSON keys through CodingKeys);
//  2. a case in `Event.Kind` below, one line in `payload` and one in `decoders`, and its
//     `severity` and `text` in EventText.swift (the compiler points at each switch);
//  3. a `$defs` entry, its name in `properties.event.enum` and an if/then line in `allOf` of
//     docs/events.schema.json, and a row in docs/EVENTS.md; a sample in EventSchemaTests.testEverySwiftKindIsInTheSchema.
// A node emits it with `out.event(.myKind(.init(...)))`; the runtime adds `node` and `wall`.
// A plugin that needs its own event uses `.custom(Custom(name:mediaTime:values:))` instead.

/// One event of a run: what happened (`kind`), the node it concerns, and when (wall seconds since the start).
public struct Event: Sendable, Codable {
    public var kind: Kind
    /// The node that emitted it; nil for the run's own events (start, stats, eos, ...).
    public var node: String?
    /// Wall-clock seconds since the run started, to the millisecond.
    public var wall: Double

    public init(_ kind: Kind, node: String? = nil, wall: Double = 0) {
        self.kind = kind
        self.node = node
        self.wall = wall
    }

    public enum Kind: Sendable {
        case start(Start)
        case control(Control)
        case stats(Stats)
        case paused(Paused)
        case resumed(Resumed)
        case stopping(Stopping)
        case warning(Warning)
        case error(ErrorMessage)
        case eos(EndOfStream)
        case applied(Applied)
        case level(Level)
        case latency(Latency)
        case passthrough(Passthrough)
        case listening(Listening)
        case producer(Producer)
        case dropped(Dropped)
        case reconnecting(Reconnecting)
        case reconnected(Reconnected)
        case bitrate(Bitrate)
        case disconnected(Disconnected)
        case null(NullCounts)
        case publisher(Publisher)
        case idle(Idle)
        case uploaded(Uploaded)
        case recording(Recording)
        case custom(Custom)

        /// The payload, for encoding and the `event` name.
        public var payload: any EventPayload {
            switch self {
            case .start(let p): p
            case .control(let p): p
            case .stats(let p): p
            case .paused(let p): p
            case .resumed(let p): p
            case .stopping(let p): p
            case .warning(let p): p
            case .error(let p): p
            case .eos(let p): p
            case .applied(let p): p
            case .level(let p): p
            case .latency(let p): p
            case .passthrough(let p): p
            case .listening(let p): p
            case .producer(let p): p
            case .dropped(let p): p
            case .reconnecting(let p): p
            case .reconnected(let p): p
            case .bitrate(let p): p
            case .disconnected(let p): p
            case .null(let p): p
            case .publisher(let p): p
            case .idle(let p): p
            case .uploaded(let p): p
            case .recording(let p): p
            case .custom(let p): p
            }
        }

        /// The `event` field of its JSON line.
        public var name: String { type(of: payload).eventName }

        /// Every kind by its `event` name: what decoding accepts, and nothing else.
        static let decoders: [String: @Sendable (any Swift.Decoder) throws -> Kind] = [
            Start.eventName: { .start(try Start(from: $0)) },
            Control.eventName: { .control(try Control(from: $0)) },
            Stats.eventName: { .stats(try Stats(from: $0)) },
            Paused.eventName: { .paused(try Paused(from: $0)) },
            Resumed.eventName: { .resumed(try Resumed(from: $0)) },
            Stopping.eventName: { .stopping(try Stopping(from: $0)) },
            Warning.eventName: { .warning(try Warning(from: $0)) },
            ErrorMessage.eventName: { .error(try ErrorMessage(from: $0)) },
            EndOfStream.eventName: { .eos(try EndOfStream(from: $0)) },
            Applied.eventName: { .applied(try Applied(from: $0)) },
            Level.eventName: { .level(try Level(from: $0)) },
            Latency.eventName: { .latency(try Latency(from: $0)) },
            Passthrough.eventName: { .passthrough(try Passthrough(from: $0)) },
            Listening.eventName: { .listening(try Listening(from: $0)) },
            Producer.eventName: { .producer(try Producer(from: $0)) },
            Dropped.eventName: { .dropped(try Dropped(from: $0)) },
            Reconnecting.eventName: { .reconnecting(try Reconnecting(from: $0)) },
            Reconnected.eventName: { .reconnected(try Reconnected(from: $0)) },
            Bitrate.eventName: { .bitrate(try Bitrate(from: $0)) },
            Disconnected.eventName: { .disconnected(try Disconnected(from: $0)) },
            NullCounts.eventName: { .null(try NullCounts(from: $0)) },
            Publisher.eventName: { .publisher(try Publisher(from: $0)) },
            Idle.eventName: { .idle(try Idle(from: $0)) },
            Uploaded.eventName: { .uploaded(try Uploaded(from: $0)) },
            Recording.eventName: { .recording(try Recording(from: $0)) },
            Custom.eventName: { .custom(try Custom(from: $0)) },
        ]

        /// The `event` names this build knows.
        public static var names: [String] { decoders.keys.sorted() }
    }

    // The line is flat: `event`, `wall`, `node`, then the payload's own fields.
    private enum Key: String, CodingKey { case event, wall, node }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let name = try c.decode(String.self, forKey: .event)
        guard let decode = Kind.decoders[name] else {
            throw DecodingError.dataCorruptedError(forKey: .event, in: c, debugDescription: "unknown event '\(name)'")
        }
        kind = try decode(decoder)
        node = try c.decodeIfPresent(String.self, forKey: .node)
        wall = try c.decode(Double.self, forKey: .wall)
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(kind.name, forKey: .event)
        try c.encode(wall, forKey: .wall)
        try c.encodeIfPresent(node, forKey: .node)
        try kind.payload.encode(to: encoder)
    }

    /// The event as one JSON line (no newline): keys sorted, `/` not escaped.
    public var jsonLine: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self) else { return #"{"event":"error","message":"unencodable event","wall":0}"# }
        return String(decoding: data, as: UTF8.self)
    }

    /// Reads one JSON line; throws on an unknown event or a missing field.
    public static func decode(line: String) throws -> Event {
        try JSONDecoder().decode(Event.self, from: Data(line.utf8))
    }

    /// The warning's or error's message, if this is one.
    public var message: String? {
        switch kind {
        case .warning(let w): w.message
        case .error(let e): e.message
        default: nil
        }
    }
}

/// What every event payload is: its fields, and the `event` name it travels under.
public protocol EventPayload: Codable, Sendable {
    static var eventName: String { get }
}

/// The run's event stream. Emitting is cheap and never blocks on consumers: events are delivered
/// in order on one serial queue of their own, never on the emitting thread and never under a lock,
/// to stdout (`--events json`) and to listeners.
public final class EventLog: @unchecked Sendable {
    public enum Output: Sendable { case none, json }

    public struct ListenerToken: Hashable, Sendable { let id: Int }

    private let lock = NSLock()
    private var output: Output
    private var listeners: [(id: Int, f: @Sendable (Event, String) -> Void)] = []
    private var nextID = 0
    /// The run's `eos` was delivered: streams made from now on end at once.
    private var ended = false
    private let delivery = DispatchQueue(label: "avgraph.events")
    public let started = Date()

    public init(output: Output) { self.output = output }

    /// Typed events, on the log's delivery queue.
    @discardableResult
    public func onEvent(_ f: @escaping @Sendable (Event) -> Void) -> ListenerToken {
        add { event, _ in f(event) }
    }

    /// One JSON line per event (what `--events json` prints), on the log's delivery queue.
    @discardableResult
    public func addListener(_ f: @escaping @Sendable (String) -> Void) -> ListenerToken {
        add { _, line in f(line) }
    }

    public func removeListener(_ token: ListenerToken) {
        lock.lock()
        listeners.removeAll { $0.id == token.id }
        lock.unlock()
    }

    /// The events from now on, as an async sequence: it ends after the run's `eos` (at once when the
    /// run has already ended), or when the consumer stops iterating.
    public func stream() -> AsyncStream<Event> {
        AsyncStream { continuation in
            lock.lock()
            guard !ended else {
                lock.unlock()
                continuation.finish()
                return
            }
            let token = addUnlocked { event, _ in
                continuation.yield(event)
                if case .eos = event.kind { continuation.finish() }
            }
            lock.unlock()
            continuation.onTermination = { [weak self] _ in self?.removeListener(token) }
        }
    }

    private func add(_ f: @escaping @Sendable (Event, String) -> Void) -> ListenerToken {
        lock.lock()
        defer { lock.unlock() }
        return addUnlocked(f)
    }

    private func addUnlocked(_ f: @escaping @Sendable (Event, String) -> Void) -> ListenerToken {
        nextID += 1
        listeners.append((nextID, f))
        return ListenerToken(id: nextID)
    }

    /// Seconds since the log was made (the run's start), to the millisecond.
    public var wall: Double { (Date().timeIntervalSince(started) * 1000).rounded() / 1000 }

    /// Events handed over and not yet delivered: a consumer that stops reading (a stdout pipe
    /// nobody drains) must not grow this without bound. Past the limit the debug kinds (`stats`,
    /// `level`) are dropped and counted; warnings, errors and the rest always go through.
    public static let pendingLimit = 10_000
    private var pending = 0
    public private(set) var droppedForBackpressure = 0

    /// Records `kind` (from `node`, if a node's) and hands it to the delivery queue.
    public func emit(_ kind: Event.Kind, node: String? = nil) {
        let event = Event(kind, node: node, wall: wall)
        lock.lock()
        if pending >= Self.pendingLimit && event.severity == .debug {
            droppedForBackpressure += 1
            lock.unlock()
            return
        }
        pending += 1
        lock.unlock()
        delivery.async { [self] in
            deliver(event)
            lock.lock()
            pending -= 1
            lock.unlock()
        }
    }

    /// Returns once every event emitted before the call has been delivered.
    public func flush() { delivery.sync {} }

    private func deliver(_ event: Event) {
        let line = event.jsonLine
        lock.lock()
        let targets = listeners
        let json = output == .json
        // Read with `listeners`: a stream made after this sees `ended`, one made before gets the `eos`.
        if case .eos = event.kind { ended = true }
        lock.unlock()
        if json && !StandardStreams.write(line + "\n") {
            // A closed stdout (`| head -1`) ends the printed stream, not the run.
            lock.lock()
            output = .none
            lock.unlock()
        }
        for l in targets { l.f(event, line) }
    }
}

/// `for await event in log`: the events from now on, until the run's `eos` (`stream()`).
extension EventLog: AsyncSequence {
    public typealias Element = Event
    public func makeAsyncIterator() -> AsyncStream<Event>.Iterator { stream().makeAsyncIterator() }
}

/// Resident memory of this process, from /proc (the figure a phone's memory ceiling counts).
public enum ProcessMemory {
    public static var residentBytes: Int {
        guard let s = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let parts = s.split(separator: " ")
        guard parts.count > 1, let pages = Int(parts[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    public static var peakResidentBytes: Int {
        guard let s = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in s.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            let kb = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
            return kb * 1024
        }
        return 0
    }
}
