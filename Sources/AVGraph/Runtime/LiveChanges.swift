import Foundation
import Synchronization

/// Live option changes of one node, owned by the runtime (the scheduler or the harness): a change
/// is checked against the option's declaration (live flag, type, range), handed to the node on
/// its own thread before its next buffer, and announced once as `applied`, with the value in the
/// option's own type and the media time of the first buffer the node emits after taking it (a
/// sink: of the first buffer it receives). Nodes only assign.
final class LiveChanges: Sendable {
    typealias Done = @Sendable (Error?) -> Void
    private struct Queued {
        var changes: [(option: String, value: OptionValue, done: Done)] = []
        /// Changes due at a media time (`ctl set ... --at T`): taken before the first buffer at or after T.
        var timed: [(at: Double, option: String, value: OptionValue, done: Done)] = []
        /// Control questions for the node (`AnswersControl`): asked from any thread, answered on the
        /// node's thread at its next turn, like a change.
        var questions: [@Sendable (any Node) -> Void] = []
    }
    private let queued = Mutex(Queued())
    /// Applied but not yet announced; touched by the node's thread only (a Mutex nobody else takes).
    private let unannounced = Mutex<[(option: String, value: OptionValue)]>([])

    /// Refuses a change the declaration does not allow, before it reaches the node.
    static func check(_ type: any Node.Type, nodeName: String, option: String, value: OptionValue) -> MediaError? {
        guard let spec = type.option(option) else { return MediaError("node '\(nodeName)' (\(type.typeName)) has no option '\(option)'") }
        guard spec.live else { return MediaError("option '\(option)' of '\(nodeName)' cannot change while running (not live)") }
        guard spec.type.admits(value) else {
            return MediaError("'\(value.text)' is not a valid \(option) (\(spec.type.rangeText ?? spec.type.name))")
        }
        return nil
    }

    /// Any thread: queues a change; `done` is called on the node's thread once the node took it or refused it.
    func enqueue(_ option: String, _ value: OptionValue, done: @escaping Done) {
        queued.withLock { $0.changes.append((option, value, done)) }
    }

    /// Any thread: queues a change for the first buffer whose media time is at or after `at`.
    func enqueue(_ option: String, _ value: OptionValue, at: Double, done: @escaping Done) {
        queued.withLock {
            $0.timed.append((at, option, value, done))
            $0.timed.sort { $0.at < $1.at }
        }
    }

    /// The node's thread, before a buffer at media time `time`: takes the timed changes due by then.
    func apply(to node: any Node, _ out: Outlet, reaching time: Double) {
        let due = queued.withLock { q in
            let due = q.timed.prefix { $0.at <= time + 1e-9 }.map { (option: $0.option, value: $0.value, done: $0.done) }
            q.timed.removeFirst(due.count)
            return due
        }
        guard !due.isEmpty else { return }
        take(due, node, out)
    }

    /// Any thread: `question` runs with the node on the node's thread, at its next turn.
    func ask(_ question: @escaping @Sendable (any Node) -> Void) {
        queued.withLock { $0.questions.append(question) }
    }

    /// The node's thread: hands every queued change to the node, then asks it the queued questions.
    func apply(to node: any Node, _ out: Outlet) {
        let (changes, asked) = queued.withLock { q in
            defer { q.changes.removeAll(); q.questions.removeAll() }
            return (q.changes, q.questions)
        }
        take(changes, node, out)
        for question in asked { question(node) }
    }

    private func take(_ changes: [(option: String, value: OptionValue, done: Done)], _ node: any Node, _ out: Outlet) {
        for c in changes {
            do {
                try node.set(option: c.option, to: c.value)
                if unannounced.withLock({ $0.isEmpty }) { out.markFirstEmission() }
                unannounced.withLock { $0.append((c.option, c.value)) }
                c.done(nil)
            } catch {
                c.done(error)
            }
        }
    }

    /// The node's thread, after each call into the node: announces the changes once the node has
    /// emitted a buffer after taking them (a sink: at the buffer it just received).
    func settle(_ out: Outlet, received: MediaBuffer? = nil) {
        guard !unannounced.withLock({ $0.isEmpty }) else { return }
        if let t = out.firstEmissionSinceMark() {
            announce(at: t, out)
        } else if !out.hasOutputs, let received {
            announce(at: Double(received.time) / 1e6, out)
        }
    }

    private func announce(at mediaTime: Double, _ out: Outlet) {
        let announced = unannounced.withLock { u in
            defer { u.removeAll() }
            return u
        }
        for c in announced {
            out.event(.applied(.init(option: c.option, value: c.value.eventValue, mediaTime: mediaTime)))
        }
    }
}

extension OptionValue {
    /// The value as JSON in its own type: `true`, `3000000`, `0.5`, `"bottom-right"`, `{"mic": true}`;
    /// durations in seconds; the rest as text.
    public var eventValue: EventValue {
        switch self {
        case .bool(let b): .bool(b)
        case .int(let i): .int(i)
        case .number(let d): .number(d)
        case .duration(let d): .number(d)
        case .string(let s): .string(s)
        case .loop(let n): .int(n)
        case .perInput(let m): .object(m.mapValues(\.eventValue))
        case .declared(let d): d.value.eventValue
        default: .string(text)
        }
    }

    /// A per-input map merged into this one (a live `gain: {mic: 2}` changes only `mic`); any other value replaces it.
    public func merging(_ change: OptionValue) -> OptionValue {
        if case .perInput(let old) = self, case .perInput(let new) = change { return .perInput(old.merging(new) { $1 }) }
        return change
    }
}
