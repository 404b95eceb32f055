import Foundation

extension PipelineRun {
    /// Per node, the index of the node whose thread runs it: its own, or, for a node that shares
    /// its producers' thread (`Node.sharesProducerThread`), the thread of its producers when they
    /// all run on one. With the nodes in an order where producers come before their consumers.
    package static func threadHosts(_ nodes: [CheckedNode]) -> (hosts: [Int], order: [Int]) {
        let index = Dictionary(nodes.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
        let producers = nodes.map { n in Set(n.inputs.compactMap { index[$0.from] }) }
        let order = CheckedPipeline.topologicalOrder(nodes, index: index)
        var hosts = Array(nodes.indices)
        for i in order where !producers[i].isEmpty && nodes[i].type.sharesProducerThread(options: nodes[i].options)
            && !nodes[i].type.keepsDeadlines(options: nodes[i].options) {
            let theirs = Set(producers[i].map { hosts[$0] })
            if theirs.count == 1 { hosts[i] = theirs.first! }
        }
        return (hosts, order)
    }
}

/// The nodes a thread runs after its own node's turns (`Node.sharesProducerThread`): after each
/// turn of the node that hosts them, each takes everything its inbox holds, producers first, so
/// what one guest emits reaches the next in the same pass. Their producers all run here, so no
/// other thread waits on their inboxes and nothing here waits on them either.
final class SharedThread {
    private struct Guest {
        let runner: PipelineRun.NodeRunner
        let driver: RoleDriver
        /// FFmpeg's lines logged during its turns name it, not the host.
        let tag: FFmpegLog.Tag
        var done = false
    }
    private let run: PipelineRun
    private let hostTag: FFmpegLog.Tag
    /// The guests that started (one whose driver could not be made has already failed and ended).
    private var guests: [Guest]

    init(host: PipelineRun.NodeRunner, run: PipelineRun) {
        self.run = run
        hostTag = FFmpegLog.tag(for: host.name)
        guests = host.guests.compactMap { g in
            do {
                let driver = try RoleDriver(node: g.node, outlet: g.outlet, inbox: g.inbox, changes: g.changes, tally: g.tally, clock: run.clock)
                return Guest(runner: g, driver: driver, tag: FFmpegLog.tag(for: g.name))
            } catch {
                run.giveUp(g, error)
                g.outlet.endAll()
                return nil
            }
        }
    }

    /// Every guest takes what its inbox holds now: its changes, its buffers, its inputs' ends
    /// (then it finishes, and its own consumers hear of its end in the same pass).
    func drain() {
        for i in guests.indices where !guests[i].done {
            let (runner, driver) = (guests[i].runner, guests[i].driver)
            var tagged = false
            defer { if tagged { FFmpegLog.tag(hostTag) } }
            do {
                driver.takeQueued()
                while let next = runner.inbox.poll(wants: driver.wants) {
                    if !tagged {
                        FFmpegLog.tag(guests[i].tag)
                        tagged = true
                    }
                    if try !driver.handle(next) {
                        try driver.finish()
                        end(i)
                        break
                    }
                }
            } catch {
                run.giveUp(runner, error)
                end(i)
            }
        }
    }

    /// After the host ended its outputs: every guest drains to its end (one pass does it, since
    /// producers come first; a guest whose input never ends would be a bug, hence the bound).
    func finishAll() {
        for _ in 0...guests.count where guests.contains(where: { !$0.done }) { drain() }
        for i in guests.indices where !guests[i].done {
            run.giveUp(guests[i].runner, MediaError("its inputs never ended"))
            end(i)
        }
    }

    private func end(_ i: Int) {
        guests[i].done = true
        guests[i].runner.outlet.endAll()
    }
}
