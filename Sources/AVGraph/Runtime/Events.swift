import Foundation
import Synchronization

// The run's events, one typed value each: `--events json` prints them one JSON object a line,
// the control socket's `watch` streams the same lines, the CLI's status line and stderr messages
// read them, and an embedding app gets them as `Event` values (`EventLog.stream()`/`onEvent`).
// docs/events.schema.json describes the lines (`avgraph inspect --events-schema` writes it from
// the kinds below and those the registry's node types declare); docs/EVENTS.md lists them.
//
// The runtime's own kinds (start, stats, eos, warning, applied...) are the cases of `Event.Kind`;
// adding one: a payload struct in EventKinds.swift with its schema in EventKinds+Schema.swift, a
// case here, one line in `payload` and `coreKinds`, its `severity` and `text` in EventText.swift.
// A node's own kind is no case here: the node type declares it (`NodeEvent`, `Node.events`) and
// emits it with `out.event(MyEvent(...))`, which arrives as `.node(MyEvent)`.

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
        case page(Page)
        case stats(Stats)
        case paused(Paused)
        case resumed(Resumed)
        case stopping(Stopping)
        case warning(Warning)
        case error(ErrorMessage)
        case eos(EndOfStream)
        case applied(Applied)
        case custom(Custom)
        /// A kind a node type declares (`Node.events`), a built-in type's or a plugin's.
        case node(any NodeEvent)
        /// A node's event read from a line whose kind no type known to this process declares
        /// (another process's run, a plugin not loaded here): kept as read, written back the same.
        case undeclared(UndeclaredEvent)

        /// The payload, for encoding and the `event` name.
        public var payload: any EventPayload {
            switch self {
            case .start(let p): p
            case .control(let p): p
            case .page(let p): p
            case .stats(let p): p
            case .paused(let p): p
            case .resumed(let p): p
            case .stopping(let p): p
            case .warning(let p): p
            case .error(let p): p
            case .eos(let p): p
            case .applied(let p): p
            case .custom(let p): p
            case .node(let p): p
            case .undeclared(let p): p
            }
        }

        /// The `event` field of its JSON line.
        public var name: String {
            if case .undeclared(let u) = self { return u.name }
            return type(of: payload).eventName
        }

        /// The payload as the node event `type`, if it is one of that type (read from its fields
        /// when the line was decoded before any type declared the kind).
        public func declared<T: NodeEvent>(_ type: T.Type) -> T? {
            switch self {
            case .node(let p): p as? T
            case .undeclared(let u): u.declared(type)
            default: nil
            }
        }

        /// The runtime's own kinds, each with the case that carries it: what decoding accepts
        /// besides the node kinds `EventCatalog` knows.
        public static var coreKinds: [(type: any EventPayload.Type, wrap: (any EventPayload) -> Kind?)] { [
            (Start.self, { ($0 as? Start).map(Kind.start) }),
            (Control.self, { ($0 as? Control).map(Kind.control) }),
            (Page.self, { ($0 as? Page).map(Kind.page) }),
            (Stats.self, { ($0 as? Stats).map(Kind.stats) }),
            (Paused.self, { ($0 as? Paused).map(Kind.paused) }),
            (Resumed.self, { ($0 as? Resumed).map(Kind.resumed) }),
            (Stopping.self, { ($0 as? Stopping).map(Kind.stopping) }),
            (Warning.self, { ($0 as? Warning).map(Kind.warning) }),
            (ErrorMessage.self, { ($0 as? ErrorMessage).map(Kind.error) }),
            (EndOfStream.self, { ($0 as? EndOfStream).map(Kind.eos) }),
            (Applied.self, { ($0 as? Applied).map(Kind.applied) }),
            (Custom.self, { ($0 as? Custom).map(Kind.custom) }),
        ] }

        /// Reads the payload of the kind `name` from a line; nil for a name this process does not know.
        static func decode(_ name: String, from decoder: any Swift.Decoder) throws -> Kind? {
            if let core = coreKinds.first(where: { $0.type.eventName == name }) {
                return core.wrap(try core.type.init(from: decoder))
            }
            return try EventCatalog.kind(named: name).map { .node(try $0.init(from: decoder)) }
        }
    }

    // The line is flat: `event`, `wall`, `node`, then the payload's own fields.
    private enum Key: String, CodingKey { case event, wall, node }

    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let name = try c.decode(String.self, forKey: .event)
        if let kind = try Kind.decode(name, from: decoder) {
            self.kind = kind
        } else if c.contains(.node) {
            kind = .undeclared(try UndeclaredEvent(from: decoder))
        } else {
            throw DecodingError.dataCorruptedError(forKey: .event, in: c, debugDescription: "unknown event '\(name)'")
        }
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

    /// Reads one JSON line; throws on a missing field, or on an unknown event that names no node
    /// (an unknown node kind is `.undeclared`).
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

/// What every event payload is: its fields, the `event` name it travels under, and how
/// docs/events.schema.json describes its line.
public protocol EventPayload: Codable, Sendable {
    static var eventName: String { get }
    /// One or two sentences: the kind's description in the schema and in `inspect`.
    static var summary: String { get }
    /// The line's fields besides `event`, `wall` and `node`, as `encode(to:)` writes them.
    static var fields: [EventField] { get }
    /// Whether the line names the node it concerns.
    static var node: EventField.Presence { get }
    /// A typical payload: the schema's test validates its line, and the docs show it.
    static var example: Self { get }
}

/// The run's event stream. Emitting is cheap and never blocks on consumers: events are delivered
/// in order on one serial queue of their own, never on the emitting thread and never under a lock,
/// to stdout (`--events json`) and to listeners.
public final class EventLog: Sendable {
    public enum Output: Sendable { case none, json }

    public struct ListenerToken: Hashable, Sendable { let id: Int }

    private struct State {
        var output: Output
        var listeners: [(id: Int, f: @Sendable (Event, String) -> Void)] = []
        var nextID = 0
        /// The run's `eos` was delivered: streams made from now on end at once.
        var ended = false
        /// Events handed over and not yet delivered.
        var pending = 0
        var droppedForBackpressure = 0

        mutating func add(_ f: @escaping @Sendable (Event, String) -> Void) -> ListenerToken {
            nextID += 1
            listeners.append((nextID, f))
            return ListenerToken(id: nextID)
        }
    }
    private let state: Mutex<State>
    private let delivery = DispatchQueue(label: "avgraph.events")
    public let started = Date()

    public init(output: Output) { state = Mutex(State(output: output)) }

    /// Typed events, on the log's delivery queue.
    @discardableResult
    public func onEvent(_ f: @escaping @Sendable (Event) -> Void) -> ListenerToken {
        state.withLock { $0.add { event, _ in f(event) } }
    }

    /// One JSON line per event (what `--events json` prints), on the log's delivery queue.
    @discardableResult
    public func addListener(_ f: @escaping @Sendable (String) -> Void) -> ListenerToken {
        state.withLock { $0.add { _, line in f(line) } }
    }

    public func removeListener(_ token: ListenerToken) {
        state.withLock { $0.listeners.removeAll { $0.id == token.id } }
    }

    /// The events from now on, as an async sequence: it ends after the run's `eos` (at once when the
    /// run has already ended), or when the consumer stops iterating.
    public func stream() -> AsyncStream<Event> {
        AsyncStream { continuation in
            let token = state.withLock { s -> ListenerToken? in
                guard !s.ended else { return nil }
                return s.add { event, _ in
                    continuation.yield(event)
                    if case .eos = event.kind { continuation.finish() }
                }
            }
            guard let token else { return continuation.finish() }
            continuation.onTermination = { [weak self] _ in self?.removeListener(token) }
        }
    }

    /// Seconds since the log was made (the run's start), to the millisecond.
    public var wall: Double { (Date().timeIntervalSince(started) * 1000).rounded() / 1000 }

    /// Events handed over and not yet delivered: a consumer that stops reading (a stdout pipe
    /// nobody drains) must not grow this without bound. Past the limit the debug kinds (`stats`, node
    /// kinds of debug severity) are dropped and counted; warnings, errors and the rest always go through.
    public static let pendingLimit = 10_000
    public var droppedForBackpressure: Int { state.withLock { $0.droppedForBackpressure } }

    /// Records `kind` (from `node`, if a node's) and hands it to the delivery queue.
    public func emit(_ kind: Event.Kind, node: String? = nil) {
        let event = Event(kind, node: node, wall: wall)
        let debug = event.severity == .debug
        let taken = state.withLock { s in
            if s.pending >= Self.pendingLimit && debug {
                s.droppedForBackpressure += 1
                return false
            }
            s.pending += 1
            return true
        }
        guard taken else { return }
        delivery.async { [self] in
            deliver(event)
            state.withLock { $0.pending -= 1 }
        }
    }

    /// Returns once every event emitted before the call has been delivered.
    public func flush() { delivery.sync {} }

    private func deliver(_ event: Event) {
        let line = event.jsonLine
        let (targets, json) = state.withLock { s in
            // Read with `listeners`: a stream made after this sees `ended`, one made before gets the `eos`.
            if case .eos = event.kind { s.ended = true }
            return (s.listeners, s.output == .json)
        }
        if json && !StandardStreams.write(line + "\n") {
            // A closed stdout (`| head -1`) ends the printed stream, not the run.
            state.withLock { $0.output = .none }
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
