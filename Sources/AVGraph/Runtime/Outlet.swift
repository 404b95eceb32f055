import Foundation

/// What an outlet needs from whatever runs the node: a pipeline run, or a test harness.
protocol OutletHost: AnyObject, Sendable {
    var realtime: Bool { get }
    var isStopping: Bool { get }
    var clock: Double { get }
    var mediaClock: Double { get }
    var events: EventLog { get }
    var duration: Double? { get }
    func waitUntil(mediaTime t: Double)
    func pauseState(at t: Double) -> PipelineRun.PauseDecision
    func account(bytes: Int)
    var overMemoryLimit: Bool { get }
}

/// What a node sees of the pipeline while it runs: where its output goes, the clock, events.
public final class Outlet: @unchecked Sendable {
    struct Target {
        let inbox: Inbox
        let lane: Int
        /// Whether what waits on this lane counts as backlog (a test harness's collector takes
        /// everything at once, whenever the test reads it).
        var holdsBack = true
    }

    public let nodeName: String
    let targets: [[Target]]
    unowned let run: any OutletHost
    let isSource: Bool
    /// Media time (µs) of the last buffer emitted on each output.
    private(set) var lastTime: [Int64]
    private var watchingFirstEmission = false
    private var firstEmissionAfterMark: Int64?
    private(set) var emitted: [Int]
    private(set) var emittedBytes: [Int]
    private let statsLock = NSLock()
    /// Media a node dropped itself (a network sink over its buffer), by kind, for `stats`.
    private var ownDrops: [MediaKind: Int] = [:]
    /// A source past the pipeline's `duration` is done.
    public private(set) var reachedEnd = false
    /// Set before the run starts when this node's pictures are previewed.
    var tap: PictureTap?

    init(nodeName: String, targets: [[Target]], run: any OutletHost, isSource: Bool) {
        self.nodeName = nodeName
        self.targets = targets
        self.run = run
        self.isSource = isSource
        lastTime = Array(repeating: -1, count: targets.count)
        emitted = Array(repeating: 0, count: targets.count)
        emittedBytes = Array(repeating: 0, count: targets.count)
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

    private let wakeLock = NSLock()
    private var wakers: [@Sendable () -> Void] = []

    /// A source that waits on something of its own (an ingest queue) says how to wake it: the run
    /// calls `wake` when it stops or a live change arrives, so that wait never needs a timeout.
    public func onWake(_ wake: @escaping @Sendable () -> Void) {
        wakeLock.lock()
        wakers.append(wake)
        wakeLock.unlock()
    }

    func wake() {
        wakeLock.lock()
        let all = wakers
        wakeLock.unlock()
        for w in all { w() }
    }

    /// Sends `buffer` to every node connected to output `output`. Sources are paced by the clock
    /// in realtime runs and cut at the pipeline's `duration`.
    public func emit(_ buffer: MediaBuffer, output: Int = 0) {
        var t = buffer.time
        if isSource {
            if run.realtime { run.waitUntil(mediaTime: Double(t) / 1e6) }
            // Paused: the source's media is discarded, and what follows moves up to close the gap.
            switch run.pauseState(at: Double(t) / 1e6) {
            case .discard: return
            case .shift(let seconds) where seconds > 0:
                shift(buffer, by: seconds)
                t = buffer.time
            default: break
            }
            if let d = run.duration, Double(t) / 1e6 >= d - 1e-9 {
                reachedEnd = true
                return
            }
            if case .frame(let f) = buffer, f.emittedAt == nil { f.emittedAt = run.mediaClock }
        }
        statsLock.lock()
        if watchingFirstEmission && firstEmissionAfterMark == nil { firstEmissionAfterMark = t }
        lastTime[output] = t
        emitted[output] += 1
        emittedBytes[output] += buffer.byteCount
        statsLock.unlock()
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

    var hasOutputs: Bool { !targets.isEmpty }

    /// Live changes: note the media time of the next buffer emitted (where a change shows first).
    func markFirstEmission() {
        statsLock.lock()
        watchingFirstEmission = true
        firstEmissionAfterMark = nil
        statsLock.unlock()
    }

    /// The media time noted since `markFirstEmission`, if a buffer has gone out; ends the watch.
    func firstEmissionSinceMark() -> Double? {
        statsLock.lock()
        defer { statsLock.unlock() }
        guard watchingFirstEmission, let t = firstEmissionAfterMark else { return nil }
        watchingFirstEmission = false
        firstEmissionAfterMark = nil
        return Double(t) / 1e6
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
        statsLock.lock()
        ownDrops[kind, default: 0] += count
        statsLock.unlock()
    }

    /// A figure of the node's own for `/metrics` (a live sink's `reconnects`, `buffered_seconds`).
    /// Safe from any thread.
    public func report(_ name: String, _ value: Double) {
        statsLock.lock()
        gauges[name] = value
        statsLock.unlock()
    }

    private var gauges: [String: Double] = [:]
    private var stateWord: String?

    /// Where the node stands, one word (a live sink's `connecting`, `sending`, `reconnecting`,
    /// `failed`): the `state` of its entry in `stats`. Safe from any thread.
    public func report(state: String) {
        statsLock.lock()
        stateWord = state
        statsLock.unlock()
    }

    var reportedState: String? {
        statsLock.lock()
        defer { statsLock.unlock() }
        return stateWord
    }

    var reported: [String: Double] {
        statsLock.lock()
        defer { statsLock.unlock() }
        return gauges
    }

    var droppedByNode: [MediaKind: Int] {
        statsLock.lock()
        defer { statsLock.unlock() }
        return ownDrops
    }

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
        statsLock.lock()
        defer { statsLock.unlock() }
        return (lastTime, emitted, emittedBytes)
    }
}
