import Foundation
import Synchronization

/// How the run answers each control request (ControlProtocol.swift has the types).
enum ControlCommands {
    /// `line` is the request as sent: a node's own command decodes its fields from it.
    static func handle(_ request: ControlRequest, line: Data, run: PipelineRun, startWatching: () -> Void) -> Result<any ControlReplyBody, ControlRefusal> {
        switch request {
        case .stats:
            return .success(StatsReply(stats: run.stats(), wall: run.clock, paused: run.isPaused))
        case .graph:
            return .success(run.graphSnapshot())
        case .pause:
            return run.pause() ? .success(EmptyReply()) : fail("already paused")
        case .resume:
            return run.resume() ? .success(EmptyReply()) : fail("not paused")
        case .stop(let reason):
            run.stop(reason: reason ?? "ctl stop")
            return .success(EmptyReply())
        case .watch:
            startWatching()
            return .success(WatchReply())
        case .get(let name):
            let node: CheckedNode, spec: OptionSpec
            switch lookup(name, run) {
            case .success(let found): (node, spec) = found
            case .failure(let refusal): return .failure(refusal)
            }
            guard let v = run.currentOption(node: node.name, option: spec.name) else { return fail("option '\(spec.name)' has no value") }
            return .success(OptionReply(node: node.name, option: spec.name, value: Redaction.text(v.text)))
        case .set(let change):
            return set(change, run: run)
        case .node(let command, _):
            return run.answerNodeCommand(command, line: line)
        }
    }

    static func set(_ change: ControlRequest.SetOption, run: PipelineRun) -> Result<any ControlReplyBody, ControlRefusal> {
        let node: CheckedNode, spec: OptionSpec
        switch lookup(change.target, run) {
        case .success(let found): (node, spec) = found
        case .failure(let refusal): return .failure(refusal)
        }
        guard spec.live else { return fail("option '\(spec.name)' of '\(node.name)' cannot change while running (not live)") }
        let value: OptionValue
        switch setValue(change.value, node: node.name, spec: spec) {
        case .success(let v): value = v
        case .failure(let refusal): return .failure(refusal)
        }
        let echo = OptionReply(node: node.name, option: spec.name, value: Redaction.text(value.text), at: change.at)
        if let at = change.at {
            // Due later: the answer says it is scheduled; a refusal when it comes due is a warning.
            let events = run.events
            run.set(node: node.name, option: spec.name, value: value, at: at) { error in
                if let error { events.emit(.warning(.init("the change of \(spec.name) due at \(at) s was refused: \(error)")), node: node.name) }
            }
            return .success(echo)
        }
        let done = ConditionLock(false)
        let result = ResultBox()
        let events = run.events
        run.set(node: node.name, option: spec.name, value: value) { error in
            // After the answer went out as a timeout, a refusal would be lost: say it as a warning.
            if result.settle(error), let error {
                events.emit(.warning(.init("the change of \(spec.name) that timed out was refused: \(error)")), node: node.name)
            }
            done.withLockWakingAll { $0 = true }
        }
        if done.wait(until: Monotonic.now + setTimeout, { $0 ? true : nil }) == nil, result.timeOut() {
            return fail("\(node.name).\(spec.name): not taken within \(Int(setTimeout)) s (the node is busy or stalled); "
                + "it stays queued: an 'applied' event or a warning will tell")
        }
        if let e = result.error { return fail("\(node.name).\(spec.name): \(e)") }
        return .success(echo)
    }

    static let setTimeout = 5.0

    /// The outcome of a `set`, decided once: by the node (taken or refused) or by the timeout.
    final class ResultBox: Sendable {
        private struct Decision {
            var decided = false
            var timedOut = false
            var error: Error?
        }
        private let decision = Mutex(Decision())

        var error: Error? { decision.withLock { $0.error } }

        /// The node's answer; true when it came after the timeout was answered.
        func settle(_ error: Error?) -> Bool {
            decision.withLock { d in
                if d.decided { return d.timedOut }
                d.decided = true
                d.error = error
                return false
            }
        }

        /// The timeout; false when the node's answer got in first.
        func timeOut() -> Bool {
            decision.withLock { d in
                if d.decided { return false }
                d.decided = true
                d.timedOut = true
                return true
            }
        }
    }

    /// The `value` of a `set` request parsed as the option's type: all a client's bytes reach
    /// before the run is asked for anything (what the control fuzz target drives).
    static func setValue(_ raw: EventValue, node: String, spec: OptionSpec) -> Result<OptionValue, ControlRefusal> {
        let text: String
        switch raw {
        case .string(let s): text = s
        case .bool(let b): text = b ? "true" : "false"
        case .int(let i): text = String(i)
        // As a person writes it: 2 rather than 2.0.
        case .number(let d): text = d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        case .list, .object: text = String(decoding: (try? ControlJSON.encoder.encode(raw)) ?? Data(), as: UTF8.self)
        }
        let (parsed, diags) = PipeLoader.parse(data: Data(text.utf8), file: "ctl")
        guard let parsed, diags.isEmpty else { return .failure(ControlRefusal("cannot read value \(PipeValue.quoted(text))")) }
        do { return .success(try spec.type.parse(parsed)) } catch {
            return .failure(ControlRefusal("\(node).\(spec.name): \(error.message)" + (error.hint.map { " (\($0))" } ?? "")))
        }
    }

    static func fail(_ message: String) -> Result<any ControlReplyBody, ControlRefusal> { .failure(ControlRefusal(message)) }

    static func lookup(_ name: ControlRequest.OptionName, _ run: PipelineRun) -> Result<(CheckedNode, OptionSpec), ControlRefusal> {
        guard let node = run.pipeline.node(name.node) else {
            return .failure(ControlRefusal("no node named '\(name.node)'" + (Suggest.hint(for: name.node, in: run.pipeline.nodes.map(\.name)).map { "; \($0)" } ?? "")))
        }
        guard let spec = node.type.option(name.option) else {
            return .failure(ControlRefusal("node '\(name.node)' (\(node.type.typeName)) has no option '\(name.option)'"
                + (Suggest.hint(for: name.option, in: node.type.options.map(\.name)).map { "; \($0)" } ?? "")))
        }
        return .success((node, spec))
    }
}
