import CFFmpeg
import Foundation

/// Drives one node by its role, the same for a run and for the test harness: each step is one
/// call into the node, with what the runtime does around it. Changes queued without a time and
/// control questions are taken at every turn; a change timed with `at` is taken before the first
/// buffer at or after its media time; a sink's tally counts what it receives; `applied` is
/// announced after the call that shows the change. A run calls the steps on the node's own thread
/// (`PipelineRun.loop`), waiting on the inbox; `EmbeddedNode` (the `NodeHarness`) calls the same
/// steps on the test's thread, never waiting. Not `Sendable`: it belongs to that one thread.
final class RoleDriver {
    let node: any Node
    let outlet: Outlet
    let inbox: Inbox
    let changes: LiveChanges
    let tally: SinkTally
    private let consumer: Consumer?
    private let filter: Filter?
    private var lastTick: Double
    /// The deadline interval the last wait was armed with (realtime runs).
    private var armedInterval: Double?
    /// Media time (µs) each input reached with the last buffer taken from it; nil before its first
    /// and once it ended.
    private var reached: [Int64?]

    init(node: any Node, outlet: Outlet, inbox: Inbox, changes: LiveChanges, tally: SinkTally, clock: Double) throws {
        guard node is Source || node is Consumer else { throw MediaError("derives from none of Source, Filter and Sink") }
        self.node = node
        self.outlet = outlet
        self.inbox = inbox
        self.changes = changes
        self.tally = tally
        consumer = node as? Consumer
        filter = node as? Filter
        lastTick = clock
        reached = Array(repeating: nil, count: inbox.lanes.count)
    }

    /// Changes queued without a time, then control questions: the node takes them at every turn.
    func takeQueued() { changes.apply(to: node, outlet) }

    /// A source's turn: one `produce`; false once it ended or reached the run's duration.
    func produce() throws -> Bool {
        guard let source = node as? Source else { throw MediaError("\(type(of: node)) is not a Source: it does not produce") }
        takeQueued()
        let more = try source.produce(outlet)
        changes.settle(outlet)
        return more && !outlet.reachedEnd
    }

    /// Whether the node takes from input `lane` now (a mixer holds back an input that runs ahead).
    func wants(_ lane: Int) -> Bool { filter?.wantsInput(lane) ?? true }

    /// Before a filter or sink waits on its inbox: the seconds until its next deadline at `clock`,
    /// nil when it has none (offline runs, nodes that do not tick). Asked each time: the node may
    /// learn at its first tick that it has no deadlines.
    func nextDeadline(at clock: Double) -> Double? {
        armedInterval = outlet.realtime ? consumer?.tickInterval : nil
        return armedInterval.map { max(0, lastTick + $0 - clock) }
    }

    /// A filter's or sink's turn with what its inbox gave: a buffer (timed changes due by its
    /// media time taken first), an input's end, or nothing (a deadline or a poke). False once
    /// every input ended: the node is then finished.
    func handle(_ next: Inbox.Next) throws -> Bool {
        guard let consumer else { throw MediaError("\(type(of: node)) is a Source: it has no inputs") }
        switch next {
        case .item(let lane, let buffer):
            if !outlet.hasOutputs { tally.count(buffer, kind: inbox.lanes[lane].kind) }
            reached[lane] = max(reached[lane] ?? buffer.time, buffer.time)
            takeTimedChanges()
            try consumer.receive(buffer, input: lane, outlet)
            changes.settle(outlet, received: buffer)
        case .ended(let lane):
            reached[lane] = nil
            takeTimedChanges()
            try consumer.inputEnded(lane, outlet)
            changes.settle(outlet)
        case .allEnded:
            return false
        case .timeout:
            break
        }
        return true
    }

    /// Timed changes due at the node's media time: that of its slowest input, among those that
    /// delivered media and did not end. With one input, a change is taken before the first buffer
    /// at or after its time; with several (a mixer), once every input reached that time, so where
    /// it shows in the output does not depend on which input's buffer the threads hand over
    /// first. An input that has not delivered anything yet (a silent microphone) holds none back.
    private func takeTimedChanges() {
        guard let time = reached.compactMap({ $0 }).min() else { return }
        changes.apply(to: node, outlet, reaching: Double(time) / 1e6)
    }

    /// Realtime nodes act on the clock too (fps repeats during a stall, the mixer fills a late
    /// input): ticks the node when the deadline armed by `nextDeadline` has come at `clock`.
    func tickIfDue(at clock: Double) throws {
        guard let interval = armedInterval, clock - lastTick >= interval else { return }
        lastTick = clock
        try tick()
    }

    /// One tick of a filter or sink (a source is never ticked).
    func tick() throws {
        guard let consumer else { return }
        try consumer.tick(outlet)
        changes.settle(outlet)
    }

    /// The end: the node flushes and finalizes; a change that shows only in what it flushes is announced then.
    func finish() throws {
        try node.finish(outlet)
        changes.settle(outlet)
    }
}

extension PipelineRun {
    /// Node `r` failed: the run hears why and stops; its producers' pushes are dropped from now
    /// on and the node lets go of what it holds. Its outputs' ends are the caller's to send.
    func giveUp(_ r: NodeRunner, _ error: Error) {
        fail(r.name, error)
        r.inbox.close()
        r.node.abort()
    }

    /// One node's thread, from its first call to its end of stream on every output: a source is
    /// asked to produce until it ends or the run stops; a filter or sink is handed what its inbox
    /// holds, in order, and ticked on the realtime clock when it has deadlines; a node without
    /// deadlines sleeps until its inbox has something, or a live change or stop wakes it. The
    /// nodes that share its thread (`SharedThread`) take their turns after each of its own.
    func loop(_ r: NodeRunner) {
        let out = r.outlet!
        FFmpegLog.tag(node: r.name)
        avg_name_this_thread(r.name)
        let shared = SharedThread(host: r, run: self)
        do {
            let driver = try RoleDriver(node: r.node, outlet: out, inbox: r.inbox, changes: r.changes, tally: r.tally, clock: clock)
            if r.isSource {
                while !isStopping, try driver.produce() { shared.drain() }
            } else {
                while true {
                    driver.takeQueued()
                    let timeout = driver.nextDeadline(at: clock)
                    guard try driver.handle(r.inbox.next(wants: driver.wants, timeout: timeout)) else { break }
                    try driver.tickIfDue(at: clock)
                    shared.drain()
                }
            }
            try driver.finish()
        } catch {
            giveUp(r, error)
        }
        out.endAll()
        shared.finishAll()
    }
}
