import Foundation
import Synchronization

/// One node driven by hand on the caller's thread, with no scheduler: every output collected in
/// an unbounded queue, live changes made and announced as the runtime makes them. The engine side
/// of `NodeHarness` (module AVGraphTesting), kept here because it stands in for the runtime's own
/// internal host; not part of the public API.
@_spi(Testing) public final class EmbeddedNode: OutletHost, @unchecked Sendable {
    public let node: any Node
    public let setup: NodeSetup
    public let events: EventLog
    public let realtime: Bool
    public var clock: Double = 0
    public var mediaClock: Double { clock }
    public var isStopping = false
    public let duration: Double?
    private let memory = MemoryBudget(limit: Int.max)
    private let changes = LiveChanges()
    private var collectors: [Inbox] = []
    private var outlet: Outlet!
    private let lines = Mutex<[String]>([])

    public init(_ type: any Node.Type, setup: NodeSetup) throws {
        self.setup = setup
        realtime = setup.realtime
        duration = setup.duration
        events = EventLog(output: .none)
        node = try type.built(setup)
        collectors = setup.outputs.map { Inbox(lanes: [Inbox.Lane(capacity: Int.max, policy: .block, kind: $0.kind)], memory: memory) }
        outlet = Outlet(nodeName: setup.name, targets: collectors.map { [Outlet.Target(inbox: $0, lane: 0, holdsBack: false)] }, run: self,
                        isSource: type.role == .source)
        events.addListener { [weak self] line in
            guard let self else { return }
            self.lines.withLock { $0.append(line) }
        }
    }

    /// Every event the node (or the runtime for it) emitted, as JSON lines.
    public var eventLines: [String] {
        events.flush()
        return lines.withLock { $0 }
    }

    public func receive(_ buffer: MediaBuffer, input: Int) throws {
        try consumer("receive").receive(buffer, input: input, outlet)
        changes.settle(outlet, received: buffer)
    }

    /// How long one `produce` call may wait for media of the source's own (a live source with no
    /// producer) before this host wakes it, as a run wakes it when it has something to do.
    public var producePatience: Double = 0.05

    /// One `produce` call; false when the source ended (or reached the duration).
    public func produce() throws -> Bool {
        guard let source = node as? Source else { throw MediaError("\(type(of: node)) is not a Source: it does not produce") }
        let outlet = self.outlet!
        let wake = DispatchWorkItem { outlet.wake() }
        DispatchQueue.global().asyncAfter(deadline: .now() + producePatience, execute: wake)
        defer { wake.cancel() }
        let more = try source.produce(outlet)
        changes.settle(outlet)
        return more && !outlet.reachedEnd
    }

    public func inputEnded(_ input: Int) throws { try consumer("end an input").inputEnded(input, outlet); changes.settle(outlet) }
    /// Advances the clock; a source is not ticked (the runtime never ticks one).
    public func tick(at clock: Double) throws {
        self.clock = clock
        guard let consumer = node as? Consumer else { return }
        try consumer.tick(outlet)
        changes.settle(outlet)
    }
    public func finish() throws { try node.finish(outlet); changes.settle(outlet) }
    public func abort() { node.abort() }
    public func wantsInput(_ input: Int) -> Bool { (node as? Filter)?.wantsInput(input) ?? true }

    private func consumer(_ what: String) throws -> Consumer {
        guard let consumer = node as? Consumer else { throw MediaError("\(type(of: node)) is a Source: it cannot \(what)") }
        return consumer
    }

    /// A live change as the runtime makes it: checked against the declaration, taken by the node
    /// now, announced as `applied` with the media time of the next buffer it emits.
    public func set(_ option: String, _ value: OptionValue) throws {
        if let refusal = LiveChanges.check(type(of: node), nodeName: setup.name, option: option, value: value) { throw refusal }
        let failure = Mutex<Error?>(nil)
        changes.enqueue(option, value) { error in failure.withLock { $0 = error } }
        changes.apply(to: node, outlet)
        if let failure = failure.withLock({ $0 }) { throw failure }
    }

    /// Takes what the node emitted on `output` so far.
    public func take(_ output: Int) -> [MediaBuffer] {
        collectors[output].takeAll(lane: 0)
    }

    func waitUntil(mediaTime t: Double) {}
    func account(bytes: Int) { memory.hold(bytes) }
    var overMemoryLimit: Bool { false }
    func pauseState(at t: Double) -> PipelineRun.PauseDecision { .keep }
}
