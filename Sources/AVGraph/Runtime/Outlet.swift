import Foundation
import Synchronization

/// What an outlet needs from whatever runs the node: a pipeline run, or a test harness.
protocol OutletHost: AnyObject, Sendable {
    var realtime: Bool { get }
    var isStopping: Bool { get }
    var clock: Double { get }
    var mediaClock: Double { get }
    var events: EventLog { get }
    var duration: Double? { get }
    func waitUntil(mediaTime t: Double)
    /// Waits until monotonic `deadline`, or less when the run stops.
    func waitUntil(monotonic deadline: Double)
    func pauseState(at t: Double) -> PipelineRun.PauseDecision
    func account(bytes: Int)
    var overMemoryLimit: Bool { get }
}

/// What a node sees of the pipeline while it runs: where its output goes, the clock, events.
public final class Outlet: Sendable {
    struct Target {
        let inbox: Inbox
        let lane: Int
        /// Whether what waits on this lane counts as backlog (a test harness's collector takes
        /// everything at once, whenever the test reads it).
        var holdsBack = true
    }

    public let nodeName: String
    /// Seconds of media a realtime source may emit ahead of the clock (`Source.mediaTimeSlack`).
    let slack: Double
    let targets: [[Target]]
    unowned let run: any OutletHost
    let isSource: Bool
    /// Written by the node's thread, read by `stats` and the control threads.
    private struct Counters {
        /// Media time (µs) of the last buffer emitted on each output.
        var lastTime: [Int64]
        var watchingFirstEmission = false
        var firstEmissionAfterMark: Int64?
        var emitted: [Int]
        var emittedBytes: [Int]
        /// Media a node dropped itself (a network sink over its buffer), by kind, for `stats`.
        var ownDrops: [MediaKind: Int] = [:]
        var gauges: [String: Double] = [:]
        var stateWord: String?
        /// Set before the run starts when this node's pictures are previewed.
        var tap: PictureTap?
    }
    private let counters: Mutex<Counters>
    private let reached = Atomic(false)
    /// A source past the pipeline's `duration` is done.
    public var reachedEnd: Bool { reached.load(ordering: .relaxed) }
    /// Set before the run starts when this node's pictures are previewed.
    var tap: PictureTap? {
        get { counters.withLock { $0.tap } }
        set { counters.withLock { $0.tap = newValue } }
    }

    init(nodeName: String, targets: [[Target]], run: any OutletHost, isSource: Bool, slack: Double = 0) {
        self.slack = slack
        self.nodeName = nodeName
        self.targets = targets
        self.run = run
        self.isSource = isSource
        counters = Mutex(Counters(lastTime: Array(repeating: -1, count: targets.count), emitted: Array(repeating: 0, count: targets.count),
                                  emittedBytes: Array(repeating: 0, count: targets.count)))
    }

    public var realtime: Bool { run.realtime }
    /// The run has been asked to stop (signal, `ctl stop`, an error elsewhere): sources end.
    public var isStopping: Bool { run.isStopping }
    /// Seconds of media the pipeline clock has advanced (realtime runs: wall time since start,
    /// less the time spent paused, so nodes that act on the clock stand still during a pause).
    public var clock: Double { run.mediaClock }
    /// The clock a live source stamps its media on (realtime runs: wall seconds since the start).
    /// The runtime then cuts the output timeline: what precedes the run's first media and the
    /// paused spans are left out, the same for every source, so `clock` and emitted times agree.
    public var sourceClock: Double { run.clock }
    public var events: EventLog { run.events }

    private let wakers = Mutex<[@Sendable () -> Void]>([])

    /// A source that waits on something of its own (an ingest queue) says how to wake it: the run
    /// calls `wake` when it stops or a live change arrives, so that wait never needs a timeout.
    public func onWake(_ wake: @escaping @Sendable () -> Void) {
        wakers.withLock { $0.append(wake) }
    }

    func wake() {
        for w in wakers.withLock({ $0 }) { w() }
    }

    /// Sends `buffer` to every node connected to output `output`. Sources are paced by the clock
    /// in realtime runs and cut at the pipeline's `duration`.
    public func emit(_ buffer: MediaBuffer, output: Int = 0) {
        var t = buffer.time
        if isSource {
            if run.realtime { run.waitUntil(mediaTime: Double(t) / 1e6 - slack) }
            // Paused: the source's media is discarded, and what follows moves up to close the gap.
            switch run.pauseState(at: Double(t) / 1e6) {
            case .discard: return
            case .shift(let seconds) where seconds > 0:
                shift(buffer, by: seconds)
                t = buffer.time
            default: break
            }
            if let d = run.duration, Double(t) / 1e6 >= d - 1e-9 {
                reached.store(true, ordering: .relaxed)
                return
            }
            if case .frame(let f) = buffer, f.emittedAt == nil { f.emittedAt = run.mediaClock }
        }
        let bytes = buffer.byteCount
        let tap = counters.withLock { c in
            if c.watchingFirstEmission && c.firstEmissionAfterMark == nil { c.firstEmissionAfterMark = t }
            c.lastTime[output] = t
            c.emitted[output] += 1
            c.emittedBytes[output] += bytes
            return c.tap
        }
        if let tap, case .frame(let f) = buffer { tap.offer(f, output: output, clock: run.clock) }
        let ts = targets[output]
        for (i, target) in ts.enumerated() {
            // Every consumer gets its own reference so per-edge metadata never leaks between branches.
            let item: MediaBuffer
            if i == ts.count - 1 { item = buffer } else {
                switch buffer {
                case .frame(let f): item = .frame(f.ref())
                case .packet(let p): item = .packet(p.ref())
                }
            }
            target.inbox.push(item, lane: target.lane, stopping: { self.run.isStopping })
        }
    }

    private func shift(_ buffer: MediaBuffer, by seconds: Double) {
        switch buffer {
        case .frame(let f):
            f.pts -= Int64((seconds / f.timeBase.double).rounded())
        case .packet(let p):
            let d = Int64((seconds / p.timeBase.double).rounded())
            if p.av.pointee.pts != Int64.min { p.av.pointee.pts -= d }
            if p.av.pointee.dts != Int64.min { p.av.pointee.dts -= d }
        }
    }

    public func emit(_ frame: Frame, output: Int = 0) { emit(.frame(frame), output: output) }

    /// Buffers emitted on `output` that its slowest consumer has not taken yet. A node that can
    /// make many at once (repeats filling a gap) paces itself by it, so a burst never reaches a
    /// queue's bound or the memory budget, where live media is dropped.
    public func backlog(output: Int = 0) -> Int {
        var most = 0
        for t in targets[output] where t.holdsBack { most = max(most, t.inbox.depth(lane: t.lane)) }
        return most
    }

    /// Waits until every consumer that holds back `output` has taken all but `atMost` of what it
    /// was sent, or monotonic `deadline` passes: a source handing on a burst paces itself by it
    /// without polling.
    public func waitForBacklog(output: Int = 0, atMost: Int = 0, until deadline: Double) {
        for t in targets[output] where t.holdsBack { t.inbox.waitForDepth(lane: t.lane, atMost: atMost, until: deadline) }
    }

    /// Waits until monotonic `deadline` (a node pacing what it hands on); a stop of the run ends
    /// the wait at once, as it ends every other wait of a node.
    public func waitUntil(monotonic deadline: Double) {
        guard run.realtime else { return }
        run.waitUntil(monotonic: deadline)
    }

    var hasOutputs: Bool { !targets.isEmpty }

    /// Live changes: note the media time of the next buffer emitted (where a change shows first).
    func markFirstEmission() {
        counters.withLock {
            $0.watchingFirstEmission = true
            $0.firstEmissionAfterMark = nil
        }
    }

    /// The media time noted since `markFirstEmission`, if a buffer has gone out; ends the watch.
    func firstEmissionSinceMark() -> Double? {
        counters.withLock { c in
            guard c.watchingFirstEmission, let t = c.firstEmissionAfterMark else { return nil }
            c.watchingFirstEmission = false
            c.firstEmissionAfterMark = nil
            return Double(t) / 1e6
        }
    }
    public func emit(_ packet: Packet, output: Int = 0) { emit(.packet(packet), output: output) }

    /// Media a node holds on to itself (a clip window) counts against the pipeline's `memory-limit`.
    public func account(heldBytes delta: Int) { run.account(bytes: delta) }

    /// Whether queued and held media together are over the pipeline's `memory-limit`.
    public var overMemoryLimit: Bool { run.overMemoryLimit }

    /// A node that drops media it holds (not the runtime's queues) reports it here, so `stats`
    /// counts every drop by node and kind. Safe from any thread.
    public func countDropped(_ count: Int, kind: MediaKind) {
        guard count > 0 else { return }
        counters.withLock { $0.ownDrops[kind, default: 0] += count }
    }

    /// A figure of the node's own for `/metrics` (a live sink's `reconnects`, `buffered_seconds`).
    /// Safe from any thread.
    public func report(_ name: String, _ value: Double) {
        counters.withLock { $0.gauges[name] = value }
    }

    /// Where the node stands, one word (a live sink's `connecting`, `sending`, `reconnecting`,
    /// `failed`): the `state` of its entry in `stats`. Safe from any thread.
    public func report(state: String) {
        counters.withLock { $0.stateWord = state }
    }

    var reportedState: String? { counters.withLock { $0.stateWord } }

    var reported: [String: Double] { counters.withLock { $0.gauges } }

    var droppedByNode: [MediaKind: Int] { counters.withLock { $0.ownDrops } }

    /// A warning from this node: stderr shows it as `avgraph: warning: NAME (TYPE): message`.
    public func warning(_ message: String) { run.events.emit(.warning(.init(Redaction.text(message))), node: nodeName) }

    /// An event of a runtime kind from this node, e.g. an undeclared one:
    /// `out.event(.custom(.init("scene", mediaTime: t, ["cut": .bool(true)])))`.
    public func event(_ kind: Event.Kind) { run.events.emit(kind, node: nodeName) }

    /// An event of a kind the node type declares (`Node.events`), e.g. `out.event(Beat(mediaTime: t, strength: s))`.
    public func event(_ payload: some NodeEvent) {
        EventCatalog.note(type(of: payload))
        run.events.emit(.node(payload), node: nodeName)
    }

    func endAll() {
        for ts in targets { for t in ts { t.inbox.end(lane: t.lane) } }
    }

    var stats: (times: [Int64], counts: [Int], bytes: [Int]) {
        counters.withLock { ($0.lastTime, $0.emitted, $0.emittedBytes) }
    }
}
