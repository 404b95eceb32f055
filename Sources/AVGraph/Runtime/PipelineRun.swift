import CFFmpeg
import Foundation
import Synchronization

/// Runs a checked pipeline: one thread per node, a bounded lane per edge, end of stream
/// flowing from sources to sinks. Stopping (signal, error, `duration`) only ends the sources;
/// everything downstream drains, encoders flush and sinks finalize the same way as at a
/// natural end, so a stopped run leaves the same playable files as a finished one.
public final class PipelineRun: OutletHost, Sendable {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let node: String
        public let message: String
        public var description: String { "node '\(node)': \(message)" }
    }

    final class NodeRunner: Sendable {
        let name: String
        /// Not `Sendable`: its hooks run on its own thread only (`loop`), which the compiler cannot
        /// see; other threads only hold the reference (to ask its type, or hand an app its source).
        nonisolated(unsafe) let node: any Node
        let inbox: Inbox
        private let madeOutlet = Mutex<Outlet?>(nil)
        /// Set once, as the run is built (the outlet needs the run, the run its runners).
        var outlet: Outlet! {
            get { madeOutlet.withLock { $0 } }
            set { madeOutlet.withLock { $0 = newValue } }
        }
        let isSource: Bool
        let inputNames: [String]
        let changes = LiveChanges()
        /// What a sink received, for `eos` and the exit line.
        let tally = SinkTally()
        /// CPU seconds of the node's own thread, set as that thread ends.
        private let measuredCPU = Mutex(0.0)
        var cpuSeconds: Double {
            get { measuredCPU.withLock { $0 } }
            set { measuredCPU.withLock { $0 = newValue } }
        }

        private let hostRunner = Mutex<NodeRunner?>(nil)
        /// The node whose thread runs this one (`Node.sharesProducerThread`); nil: its own thread.
        var host: NodeRunner? {
            get { hostRunner.withLock { $0 } }
            set { hostRunner.withLock { $0 = newValue } }
        }
        private let hostedRunners = Mutex<[NodeRunner]>([])
        /// The nodes this one's thread runs besides itself, in the graph's order.
        var guests: [NodeRunner] {
            get { hostedRunners.withLock { $0 } }
            set { hostedRunners.withLock { $0 = newValue } }
        }

        init(name: String, node: any Node, inbox: Inbox, isSource: Bool, inputNames: [String]) {
            self.name = name
            self.node = node
            self.inbox = inbox
            self.isSource = isSource
            self.inputNames = inputNames
        }

        /// Ends the wait of the thread that runs this node, so it takes a change or question now.
        private func poke() {
            inbox.poke()
            outlet?.wake()
            host?.poke()
        }

        func enqueueChange(_ option: String, _ value: OptionValue, done: @escaping LiveChanges.Done) {
            changes.enqueue(option, value, done: done)
            poke()
        }

        func enqueueChange(_ option: String, _ value: OptionValue, at: Double, done: @escaping LiveChanges.Done) {
            changes.enqueue(option, value, at: at, done: done)
            outlet?.wake()
            host?.poke()
        }

        /// `question` runs with the node on its own thread, at its next turn (a control command it answers).
        func ask(_ question: @escaping @Sendable (any Node) -> Void) {
            changes.ask(question)
            poke()
        }
    }

    public let pipeline: CheckedPipeline
    public let events: EventLog
    public let realtime: Bool
    /// Routes and settings for what the run serves over `--http` besides its page (WHEP).
    public let web = WebEndpoints()
    public let duration: Double?
    let memory: MemoryBudget
    private let built = Mutex<[NodeRunner]>([])
    /// Set once, as the run is built.
    var runners: [NodeRunner] {
        get { built.withLock { $0 } }
        set { built.withLock { $0 = newValue } }
    }
    /// What the run's threads share: stopping, pausing, the first failure, options changed live.
    /// Sources waiting for their media time (`waitUntil`) sleep on it until `stop`.
    private struct State {
        var stopping = false
        var stopReason = "end"
        var failure: Failure?
        var pausedAt: Double?
        var pausedSpans: [(start: Double, end: Double)] = []
        var timeline = (firstMedia: Double?.none, grid: FrameGrid(rates: []))
        var currentOptions: [String: [String: OptionValue]] = [:]
    }
    private let state = ConditionLock(State())
    /// `Date().timeIntervalSinceReferenceDate` at the start, as bits: read by every `clock`.
    private let startWall = Atomic<UInt64>(Date().timeIntervalSinceReferenceDate.bitPattern)
    private let finished = DispatchGroup()
    private struct Settings {
        var onStart: (@Sendable () -> Void)?
        var statsInterval = 1.0
    }
    private let settings = Mutex(Settings())
    /// Called right after the `start` event (the CLI announces the control socket there).
    public var onStart: (@Sendable () -> Void)? {
        get { settings.withLock { $0.onStart } }
        set { settings.withLock { $0.onStart = newValue } }
    }
    /// Seconds between `stats` snapshots (events, status line, the live rates of `ctl graph`).
    public var statsInterval: Double {
        get { settings.withLock { $0.statsInterval } }
        set { settings.withLock { $0.statsInterval = newValue } }
    }
    let rates = EmissionRates()

    public init(_ pipeline: CheckedPipeline, events: EventLog, realtime: Bool? = nil) throws {
        precondition(pipeline.isValid, "run only checked pipelines")
        self.pipeline = pipeline
        self.events = events
        self.realtime = realtime ?? pipeline.realtime
        self.duration = pipeline.settings.duration
        memory = MemoryBudget(limit: pipeline.settings.memoryLimit)
        let grid = FrameGrid(rates: pipeline.nodes.flatMap { $0.outputs.filter { $0.kind == .rawVideo }.map(\.frameRate) })
        state.withLock { $0.timeline.grid = grid }
        try build()
    }

    private func build() throws {
        let defaultPolicy: (MediaKind) -> QueuePolicy = { kind in
            guard self.realtime else { return .block }
            switch kind {
            case .rawVideo: return .dropOldest
            case .encodedVideo: return .dropToKeyframe
            default: return .block
            }
        }
        var built: [NodeRunner] = []
        let (hosts, order) = Self.threadHosts(pipeline.nodes)
        do {
            for (ni, n) in pipeline.nodes.enumerated() {
                var durationLimit = duration
                if let own = (n.type as? any EndsByItself.Type)?.mediaDuration(n.options), own > 0 { durationLimit = min(durationLimit ?? own, own) }
                var setup = NodeSetup(
                    name: n.name, options: n.options,
                    inputs: n.inputs.map { Negotiation.Input(pad: $0.pad, from: $0.from, fromPad: $0.fromPad, format: $0.format!) },
                    outputs: n.outputs, baseDirectory: pipeline.baseDirectory, realtime: realtime, duration: durationLimit,
                    consumersStandUpright: n.outputs.indices.map { o in
                        let consumers = pipeline.nodes.filter { c in c.inputs.contains { $0.from == n.name && $0.fromOutput == o } }
                        return !consumers.isEmpty && consumers.allSatisfy { $0.type.standsUpright }
                    })
                setup.pipelineName = pipeline.settings.name
                setup.web = web
                setup.pixelsOnRequest = n.outputs.indices.map { pipeline.pixelsOnRequest(node: n.name, output: $0) }
                setup.samplesOnRequest = n.outputs.indices.map { pipeline.samplesOnRequest(node: n.name, output: $0) }
                setup.orientationCarried = n.outputs.indices.map { pipeline.orientationCarried(node: n.name, output: $0) }
                setup.consumersHide = n.outputs.indices.map { o in
                    let fed = pipeline.nodes.flatMap { c in
                        c.inputs.indices.filter { c.inputs[$0].from == n.name && c.inputs[$0].fromOutput == o }
                            .map { c.type.hiddenSpans(input: $0, options: c.options) }
                    }
                    return TimeSpan.common(fed)
                }
                let lanes = n.inputs.map { c -> Inbox.Lane in
                    let kind = c.format?.kind ?? .rawVideo
                    var policy = n.queue?.policy ?? defaultPolicy(kind)
                    if policy == .dropToKeyframe && kind != .encodedVideo { policy = .dropOldest }
                    // Raw pictures are megabytes each: a few in flight keep every thread busy; small
                    // audio blocks and packets get more room so one branch can run ahead of another.
                    // Pictures that travel undecoded weigh nothing: room for a burst instead of drops.
                    let undecoded = kind == .rawVideo && pipeline.pixelsOnRequest(node: c.from, output: c.fromOutput)
                    let capacity = n.queue?.size ?? (kind == .rawVideo ? (undecoded ? 30 : self.rawVideoCapacity(c.format)) : 32)
                    // Its producers' thread takes what it put there right after its turn: a bound
                    // would only stall that thread on itself.
                    if hosts[ni] != ni { return Inbox.Lane(capacity: 1 << 40, policy: .block, kind: kind) }
                    return Inbox.Lane(capacity: capacity, policy: policy, kind: kind)
                }
                let node: any Node
                FFmpegLog.tag(node: n.name)
                defer { FFmpegLog.tag(node: nil) }
                do { node = try n.type.built(setup) } catch {
                    throw Failure(node: n.name, message: "\(error)")
                }
                built.append(NodeRunner(name: n.name, node: node, inbox: Inbox(lanes: lanes, memory: memory),
                                        isSource: n.type.role == .source, inputNames: n.inputs.map(\.from)))
            }
        } catch {
            for r in built { r.node.abort() }
            throw error
        }
        runners = built
        for i in order where hosts[i] != i {
            let h = hosts[i]
            built[i].host = built[h]
            built[h].guests.append(built[i])
        }
        for (ri, r) in runners.enumerated() {
            let n = pipeline.nodes[ri]
            var targets = Array(repeating: [Outlet.Target](), count: n.outputs.count)
            for (ci, consumer) in pipeline.nodes.enumerated() {
                for (lane, c) in consumer.inputs.enumerated() where c.from == n.name {
                    targets[c.fromOutput].append(Outlet.Target(inbox: runners[ci].inbox, lane: lane))
                }
            }
            r.outlet = Outlet(nodeName: r.name, targets: targets, run: self, isSource: r.isSource, slack: (r.node as? Source)?.mediaTimeSlack ?? 0)
        }
    }

    /// Live runs size raw-video lanes by bytes: a deeper queue only adds latency (the oldest
    /// picture is dropped anyway) and every queued picture is a pooled buffer kept for the run,
    /// so full-size screen pictures (4 MB) get one slot and small ones room for a burst.
    func rawVideoCapacity(_ format: StreamFormat?) -> Int {
        guard realtime, let f = format, f.width > 0, f.height > 0 else { return 3 }
        let pixelFormat = av_get_pix_fmt(f.pixelFormat)
        let bytes = pixelFormat == AV_PIX_FMT_NONE ? f.width * f.height * 4
            : Int(av_image_get_buffer_size(pixelFormat, Int32(f.width), Int32(f.height), 1))
        return max(1, min(8, (6 << 20) / max(bytes, 1)))
    }

    /// The running instance of node `name` (an embedding app reaches its `app` sources this way).
    public func node(named name: String) -> (any Node)? { runners.first { $0.name == name }?.node }

    public var isStopping: Bool { state.withLock { $0.stopping } }

    /// Seconds since the run started.
    public var clock: Double { Date().timeIntervalSinceReferenceDate - Double(bitPattern: startWall.load(ordering: .relaxed)) }

    /// Woken by `stop`: a source waiting for its media time ends its wait at once.
    func waitUntil(mediaTime t: Double) {
        while true {
            let wait = t - clock
            if wait <= 0 { return }
            if state.wait(until: Monotonic.now + wait, { $0.stopping ? true : nil }) != nil { return }
        }
    }

    func waitUntil(monotonic deadline: Double) {
        _ = state.wait(until: deadline) { $0.stopping ? true : nil }
    }

    func account(bytes: Int) { memory.hold(bytes) }
    var overMemoryLimit: Bool { memory.isOver }

    // MARK: pause

    enum PauseDecision { case keep, discard, shift(Double) }

    /// Pauses a realtime run: sources' media from now on is discarded until `resume`.
    public func pause() -> Bool {
        let at = clock
        let paused = state.withLock { s in
            guard s.pausedAt == nil else { return false }
            s.pausedAt = at
            return true
        }
        guard paused else { return false }
        // Never under the state lock: a listener may ask the run for its state.
        events.emit(.paused(.init(mediaTime: at)))
        return true
    }

    /// Resumes: the paused span is cut out of the output timeline, the same for every source.
    public func resume() -> Bool {
        let end = clock
        let resumed: Double? = state.withLock { s in
            guard let start = s.pausedAt else { return nil }
            s.pausedSpans.append((start, end))
            s.pausedAt = nil
            return start
        }
        guard let start = resumed else { return false }
        events.emit(.resumed(.init(pausedFor: end - start, mediaTime: start)))
        return true
    }

    /// Wall seconds since the start, less what the timeline cuts (before the first media, paused
    /// spans); frozen while paused.
    public var mediaClock: Double {
        let now = clock
        return state.withLock { s in
            if let p = s.pausedAt { return p - Self.timelineCut(before: p, s) }
            return now - Self.timelineCut(before: now, s)
        }
    }

    public var isPaused: Bool { state.withLock { $0.pausedAt != nil } }

    func pauseState(at t: Double) -> PauseDecision {
        let realtime = realtime
        return state.withLock { s in
            if let p = s.pausedAt, t >= p { return .discard }
            if s.pausedSpans.contains(where: { t >= $0.start && t < $0.end }) { return .discard }
            if s.timeline.firstMedia == nil && realtime { s.timeline.firstMedia = t }
            let cut = Self.timelineCut(before: t, s)
            // The cut may lie up to the grid's slack after the media it starts at (FrameGrid.floor).
            return t < cut - FrameGrid.slack ? .discard : cut > 0 ? .shift(cut) : .keep
        }
    }

    /// What the output timeline leaves out before source time `t`: everything before the first
    /// media (a producer that connects late, a paused start), then the paused spans; a whole
    /// number of frame periods, so cutting never moves video off its frame grid relative to audio.
    private static func timelineCut(before t: Double, _ s: State) -> Double {
        guard let first = s.timeline.firstMedia else { return s.pausedSpans.filter { $0.end <= t }.reduce(0) { $0 + $1.end - $1.start } }
        let paused = s.pausedSpans.filter { $0.start >= first && $0.end <= t }.reduce(0) { $0 + $1.end - $1.start }
        return s.timeline.grid.floor(first + paused)
    }

    /// Ends the sources; everything downstream drains and finalizes.
    public func stop(reason: String = "stop") {
        // Sources waiting for their media time wake and end their wait.
        let first = state.withLockWakingAll { s in
            defer { s.stopping = true }
            if !s.stopping { s.stopReason = reason }
            return !s.stopping
        }
        guard first else { return }
        // Producers blocked on a full lane look at `isStopping` again.
        for r in runners {
            r.inbox.wake()
            r.outlet?.wake()
        }
        events.emit(.stopping(.init(reason: reason)))
    }

    func fail(_ node: String, _ error: Error) {
        // A node's error may quote a URL with its stream key (FFmpeg's messages do).
        let message = Redaction.text("\(error)")
        let f = Failure(node: node, message: message)
        state.withLock { s in if s.failure == nil { s.failure = f } }
        events.emit(.error(.init(message)), node: node)
        stop(reason: "error")
    }

    /// Runs to the end; throws the first node failure.
    public func run() throws {
        startWall.store(Date().timeIntervalSinceReferenceDate.bitPattern, ordering: .relaxed)
        events.emit(.start(.init(pipeline: pipeline.settings.name, realtime: realtime, nodes: runners.count, duration: duration)))
        onStart?()
        for r in runners where r.host == nil {
            finished.enter()
            let thread = Thread { [self] in
                self.loop(r)
                r.cpuSeconds = CPUTime.thisThread
                self.finished.leave()
            }
            thread.name = r.name
            thread.stackSize = 4 << 20
            thread.start()
        }
        let statsInterval = statsInterval
        var drops = DropWarnings()
        func sayDrops(final: Bool) {
            for w in drops.due(runners, now: Date().timeIntervalSinceReferenceDate, final: final) {
                events.emit(.warning(.init(w.message)), node: w.node)
            }
        }
        while finished.wait(timeout: .now() + statsInterval) == .timedOut {
            rates.sample(self)
            events.emit(.stats(stats()))
            sayDrops(final: false)
        }
        let s = stats()
        events.emit(.stats(s))
        sayDrops(final: true)
        let (f, reason) = state.withLock { ($0.failure, $0.stopReason) }
        let cpu = Event.EndOfStream.CPU(process: CPUTime.process, nodes: runners.map { .init(node: $0.name, seconds: $0.cpuSeconds, thread: $0.host?.name) })
        let figures = Dictionary(uniqueKeysWithValues: s.nodes.compactMap { n in n.figures.map { (n.node, $0) } })
        events.emit(.eos(.init(mediaTime: s.mediaTime, peakRSS: ProcessMemory.peakResidentBytes, reason: reason, sinks: sinkSummaries,
                               cpu: cpu, figures: figures.isEmpty ? nil : figures)))
        events.flush()
        if let f { throw f }
    }

    /// Changes a live option; the node applies it before its next frame or block, or with `at`
    /// (media seconds) before the first frame or block at or after that time (a node with several
    /// inputs: once every input that has delivered media reached it; `RoleDriver`).
    public func set(node: String, option: String, value: OptionValue, at: Double? = nil, done: @escaping @Sendable (Error?) -> Void) {
        guard let r = runners.first(where: { $0.name == node }), let checked = pipeline.node(node) else {
            done(MediaError("no node named '\(node)'"))
            return
        }
        if let refusal = LiveChanges.check(checked.type, nodeName: node, option: option, value: value) { done(refusal); return }
        let taken: LiveChanges.Done = { [self] error in
            if error == nil {
                state.withLock { s in
                    let current = s.currentOptions[node]?[option] ?? checked.options[option]
                    s.currentOptions[node, default: [:]][option] = current.map { $0.merging(value) } ?? value
                }
            }
            done(error)
        }
        if let at { r.enqueueChange(option, value, at: at, done: taken) } else { r.enqueueChange(option, value, done: taken) }
    }

    public func currentOption(node: String, option: String) -> OptionValue? {
        state.withLock { $0.currentOptions[node]?[option] } ?? pipeline.node(node)?.options[option]
    }

    /// What each sink received so far.
    public var sinkSummaries: [Event.SinkSummary] {
        runners.filter { !$0.isSource && !$0.outlet.hasOutputs }.map { $0.tally.summary(node: $0.name) }
    }

    public func stats() -> Event.Stats {
        var nodes: [Event.Stats.NodeStats] = []
        var mediaTime: Int64 = 0
        var total = Event.KindCounts(video: 0, audio: 0)
        for r in runners {
            let s = r.outlet.stats
            // Drops on the node's input queues plus those the node made itself (a network sink's buffer).
            var byKind = Event.KindCounts(video: 0, audio: 0)
            for (kind, n) in r.inbox.dropsByKind.merging(r.outlet.droppedByNode, uniquingKeysWith: +) {
                if kind.isVideo { byKind.video += n } else { byKind.audio += n }
            }
            let drops = byKind.video + byKind.audio
            total.video += byKind.video
            total.audio += byKind.audio
            var o = Event.Stats.NodeStats(node: r.name, queue: r.inbox.depths, dropped: drops)
            if drops > 0 { o.droppedByKind = byKind }
            o.state = r.outlet.reportedState
            let figures = r.outlet.reported
            if !figures.isEmpty { o.figures = figures }
            if !s.counts.isEmpty {
                o.emitted = s.counts
                o.bytes = s.bytes
                o.time = s.times.map { Double(max($0, 0)) / 1e6 }
            }
            if r.outlet.targets.isEmpty == false, pipeline.nodes.first(where: { $0.name == r.name })?.type.inputs.isEmpty == false {
                mediaTime = max(mediaTime, s.times.max() ?? 0)
            }
            nodes.append(o)
        }
        return Event.Stats(nodes: nodes, mediaTime: Double(mediaTime) / 1e6, dropped: total.video + total.audio,
                           droppedByKind: total, rss: ProcessMemory.residentBytes, queuedBytes: memory.used)
    }
}
