import Foundation
import Synchronization

/// One node driven by hand on the caller's thread, with no scheduler and no thread of its own,
/// by the run's own `RoleDriver`: a buffer goes into the node's inbox as an upstream node's would,
/// and the driver's turns run until the node would wait, so the node takes its inputs in a run's
/// order, timed changes when media time reaches them and control questions at its turn, and
/// `applied` is announced as in a run. Every output is collected in an unbounded queue. The
/// engine side of `NodeHarness` (module AVGraphTesting), kept here because it stands in for the
/// runtime's own internal host; not part of the public API.
@_spi(Testing) public final class EmbeddedNode {
    public let node: any Node
    public let setup: NodeSetup
    private let host: HarnessHost
    private let inbox: Inbox
    private let collectors: [Inbox]
    private let changes = LiveChanges()
    private let driver: RoleDriver

    public var events: EventLog { host.events }
    public var realtime: Bool { host.realtime }
    public var duration: Double? { host.duration }
    public var clock: Double { host.clock }

    public init(_ type: any Node.Type, setup: NodeSetup) throws {
        self.setup = setup
        let host = HarnessHost(realtime: setup.realtime, duration: setup.duration)
        self.host = host
        node = try type.built(setup)
        inbox = Inbox(lanes: setup.inputs.map { Inbox.Lane(capacity: Int.max, policy: .block, kind: $0.format.kind) }, memory: host.memory)
        collectors = setup.outputs.map { Inbox(lanes: [Inbox.Lane(capacity: Int.max, policy: .block, kind: $0.kind)], memory: host.memory) }
        let outlet = Outlet(nodeName: setup.name, targets: collectors.map { [Outlet.Target(inbox: $0, lane: 0, holdsBack: false)] }, run: host,
                            isSource: type.role == .source)
        driver = try RoleDriver(node: node, outlet: outlet, inbox: inbox, changes: changes, tally: SinkTally(), clock: 0)
    }

    /// Every event the node (or the runtime for it) emitted, as JSON lines.
    public var eventLines: [String] {
        events.flush()
        return host.lines.all
    }

    /// What a sink received so far, as the run's `eos` counts it.
    public var received: Event.SinkSummary { driver.tally.summary(node: setup.name) }

    /// Queues `buffer` on input `input` and lets the node take what it wants of its inbox.
    public func receive(_ buffer: MediaBuffer, input: Int) throws {
        try checkInput(input, "receive")
        inbox.push(buffer, lane: input, stopping: { false })
        try runUntilIdle()
    }

    /// Ends input `input`: the node hears of it once it took what that input still holds.
    public func inputEnded(_ input: Int) throws {
        try checkInput(input, "end an input")
        inbox.end(lane: input)
        try runUntilIdle()
    }

    private func checkInput(_ input: Int, _ what: String) throws {
        guard node is Consumer else { throw MediaError("\(type(of: node)) is a Source: it cannot \(what)") }
        guard setup.inputs.indices.contains(input) else { throw MediaError("no input \(input): the node has \(setup.inputs.count)") }
    }

    /// The driver's turns, as on a node's thread, until the node would wait for more.
    private func runUntilIdle() throws {
        guard node is Consumer else { return }
        while true {
            driver.takeQueued()
            try host.throwRefusal()
            let next = inbox.next(wants: driver.wants, timeout: 0)
            if case .timeout = next { return }
            let more = try driver.handle(next)
            try host.throwRefusal()
            if !more { return }
        }
    }

    /// How long one `produce` call may wait for media of the source's own (a live source with no
    /// producer) before this host wakes it, as a run wakes it when it has something to do.
    public var producePatience: Double = 0.05

    /// One `produce` call; false when the source ended (or reached the duration).
    public func produce() throws -> Bool {
        let outlet = driver.outlet
        let wake = DispatchWorkItem { outlet.wake() }
        DispatchQueue.global().asyncAfter(deadline: .now() + producePatience, execute: wake)
        defer { wake.cancel() }
        let more = try driver.produce()
        try host.throwRefusal()
        return more
    }

    /// Sets the clock the node reads, takes what is queued, and ticks the node, as a run does at
    /// its deadline (here whenever the test says; a source is never ticked).
    public func tick(at clock: Double) throws {
        host.clock = clock
        driver.takeQueued()
        try host.throwRefusal()
        try driver.tick()
    }

    /// What is still due (a buffer a filter held back until its inputs ended), then the node's end.
    public func finish() throws {
        try runUntilIdle()
        try driver.finish()
    }

    public func abort() { node.abort() }

    /// A live change as the runtime makes it: checked against the declaration, taken by the node
    /// now, announced as `applied` with the media time of the next buffer it emits.
    public func set(_ option: String, _ value: OptionValue) throws {
        if let refusal = LiveChanges.check(type(of: node), nodeName: setup.name, option: option, value: value) { throw refusal }
        changes.enqueue(option, value) { [host] in host.refuse($0) }
        driver.takeQueued()
        try host.throwRefusal()
    }

    /// A timed change (`ctl set ... --at T`): taken before the first buffer the node receives at
    /// or after media time `at`; a node's refusal is thrown by the call that handed it that buffer.
    public func set(_ option: String, _ value: OptionValue, at: Double) throws {
        if let refusal = LiveChanges.check(type(of: node), nodeName: setup.name, option: option, value: value) { throw refusal }
        changes.enqueue(option, value, at: at) { [host] in host.refuse($0) }
    }

    /// A control command the node answers (`AnswersControl`), asked as the control socket asks
    /// it: at the node's next turn.
    public func answer(_ request: NodeControlRequest) -> NodeControlAnswer {
        let reply = NodeReply()
        changes.ask { node in reply.settle((node as? any AnswersControl)?.answer(request) ?? .refused("'\(request.command)' is not answered here")) }
        driver.takeQueued()
        return reply.wait(seconds: 0) ?? .refused("'\(request.command)' was not answered")
    }

    /// Takes what the node emitted on `output` so far.
    public func take(_ output: Int) -> [MediaBuffer] {
        collectors[output].takeAll(lane: 0)
    }
}

/// The run as the harness's node sees it: a clock the test sets, no pacing, pausing or memory limit.
final class HarnessHost: OutletHost {
    let realtime: Bool
    let duration: Double?
    let events = EventLog(output: .none)
    let memory = MemoryBudget(limit: Int.max)
    let lines = CollectedLines()
    private let state = Mutex<(clock: Double, refusal: (any Error)?)>((0, nil))

    init(realtime: Bool, duration: Double?) {
        self.realtime = realtime
        self.duration = duration
        events.addListener { [lines] in lines.append($0) }
    }

    var isStopping: Bool { false }
    var clock: Double {
        get { state.withLock { $0.clock } }
        set { state.withLock { $0.clock = newValue } }
    }
    var mediaClock: Double { clock }
    func waitUntil(mediaTime t: Double) {}
    func waitUntil(monotonic deadline: Double) {}
    func account(bytes: Int) { memory.hold(bytes) }
    var overMemoryLimit: Bool { false }
    func pauseState(at t: Double) -> PipelineRun.PauseDecision { .keep }

    /// A change the node refused (nil: taken), kept for the harness call that handed it over.
    func refuse(_ error: (any Error)?) {
        guard let error else { return }
        state.withLock { $0.refusal = $0.refusal ?? error }
    }

    func throwRefusal() throws {
        if let error = state.withLock({ s in defer { s.refusal = nil }; return s.refusal }) { throw error }
    }
}

/// Event lines as they are emitted, from whichever thread emits them.
final class CollectedLines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
