import CFFmpeg
import Foundation

/// How the runtime drives each role on the node's own thread: a source is asked to produce
/// until it ends or the run stops; a filter or sink is handed what its inbox holds, in order,
/// and ticked on the realtime clock when it has deadlines. Every role finishes the same way.
extension PipelineRun {
    /// One node's thread, from its first call to its end of stream on every output.
    func loop(_ r: NodeRunner) {
        let out = r.outlet!
        FFmpegLog.tag(node: r.name)
        avg_name_this_thread(r.name)
        do {
            switch r.node {
            case let source as Source:
                while !isStopping && !out.reachedEnd {
                    r.applyChanges()
                    let more = try source.produce(out)
                    r.changes.settle(out)
                    if !more { break }
                }
            case let consumer as Consumer:
                try consume(r, consumer, out)
            default:
                throw MediaError("derives from none of Source, Filter and Sink")
            }
            try r.node.finish(out)
        } catch {
            fail(r.name, error)
            r.inbox.close()
            r.node.abort()
        }
        out.endAll()
    }

    /// A filter's or sink's loop: buffers and ends from its inbox, and in a realtime run `tick`
    /// at the node's own deadlines (`tickInterval`); a node without deadlines sleeps until its
    /// inbox has something, a live change or stop wakes it.
    private func consume(_ r: NodeRunner, _ node: Consumer, _ out: Outlet) throws {
        let filter = node as? Filter
        var lastTick = clock
        loop: while true {
            r.applyChanges()
            // Asked each time: the node may learn (at its first tick) that it has no deadlines.
            let interval = realtime ? node.tickInterval : nil
            let timeout = interval.map { max(0, lastTick + $0 - clock) }
            switch r.inbox.next(wants: { filter?.wantsInput($0) ?? true }, timeout: timeout) {
            case .item(let lane, let buffer):
                if !out.hasOutputs { r.tally.count(buffer, kind: r.inbox.lanes[lane].kind) }
                r.changes.apply(to: r.node, out, reaching: Double(buffer.time) / 1e6)
                try node.receive(buffer, input: lane, out)
                r.changes.settle(out, received: buffer)
            case .ended(let lane):
                try node.inputEnded(lane, out)
                r.changes.settle(out)
            case .allEnded: break loop
            case .timeout: break
            }
            // Realtime nodes act on the clock too (fps repeats during a stall, the mixer fills a late input).
            if let interval, clock - lastTick >= interval {
                lastTick = clock
                try node.tick(out)
                r.changes.settle(out)
            }
        }
    }
}
