import Foundation
import Synchronization

/// How the run answers each control request (ControlProtocol.swift has the types).
enum ControlCommands {
    /// `line` is the request as sent: a node's own command decodes its fields from it. `reply`
    /// gets the outcome once, at once or when the node answers (a `set`, a node's command, each
    /// at most `setTimeout` later), on the thread that decided it.
    static func handle(_ request: ControlRequest, line: Data, run: PipelineRun, startWatching: () -> Void,
                       reply: @escaping @Sendable (ControlOutcome) -> Void) {
        switch request {
        case .stats:
            reply(.success(StatsReply(stats: run.stats(), wall: run.clock, paused: run.isPaused)))
        case .graph:
            reply(.success(run.graphSnapshot()))
        case .pause:
            reply(run.pause() ? .success(EmptyReply()) : fail("already paused"))
        case .resume:
            reply(run.resume() ? .success(EmptyReply()) : fail("not paused"))
        case .stop(let reason):
            run.stop(reason: reason ?? "ctl stop")
            reply(.success(EmptyReply()))
        case .watch:
            startWatching()
            reply(.success(WatchReply()))
        case .get(let name):
            let node: CheckedNode, spec: OptionSpec
            switch lookup(name, run) {
            case .success(let found): (node, spec) = found
            case .failure(let refusal): return reply(.failure(refusal))
            }
            guard let v = run.currentOption(node: node.name, option: spec.name) else { return reply(fail("option '\(spec.name)' has no value")) }
            reply(.success(OptionReply(node: node.name, option: spec.name, value: Redaction.text(v.text))))
        case .set(let change):
            set(change, run: run, reply: reply)
        case .node(let command, _):
            run.answerNodeCommand(command, line: line, reply: reply)
        }
    }

    static func set(_ change: ControlRequest.SetOption, run: PipelineRun, reply: @escaping @Sendable (ControlOutcome) -> Void) {
        let node: CheckedNode, spec: OptionSpec
        switch lookup(change.target, run) {
        case .success(let found): (node, spec) = found
        case .failure(let refusal): return reply(.failure(refusal))
        }
        guard spec.live else { return reply(fail("option '\(spec.name)' of '\(node.name)' cannot change while running (not live)")) }
        let value: OptionValue
        switch setValue(change.value, node: node.name, spec: spec) {
        case .success(let v): value = v
        case .failure(let refusal): return reply(.failure(refusal))
        }
        let echo = OptionReply(node: node.name, option: spec.name, value: Redaction.text(value.text), at: change.at)
        let (nodeName, option, events) = (node.name, spec.name, run.events)
        if let at = change.at {
            // Due later: the answer says it is scheduled; a refusal when it comes due is a warning.
            run.set(node: nodeName, option: option, value: value, at: at) { error in
                if let error { events.emit(.warning(.init("the change of \(option) due at \(at) s was refused: \(error)")), node: nodeName) }
            }
            return reply(.success(echo))
        }
        let pending = PendingAnswer(reply)
        run.set(node: nodeName, option: option, value: value) { error in
            let outcome: ControlOutcome = error.map { fail("\(nodeName).\(option): \($0)") } ?? .success(echo)
            // After the answer went out as a timeout, a refusal would be lost: say it as a warning.
            if !pending.settle(outcome), let error {
                events.emit(.warning(.init("the change of \(option) that timed out was refused: \(error)")), node: nodeName)
            }
        }
        pending.timeOut(after: setTimeout) {
            fail("\(nodeName).\(option): not taken within \(Int(setTimeout)) s (the node is busy or stalled); "
                + "it stays queued: an 'applied' event or a warning will tell")
        }
    }

    static let setTimeout = 5.0

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
