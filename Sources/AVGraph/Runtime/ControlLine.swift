import Foundation
import Synchronization

extension PipelineRun {
    /// One request line of the control protocol in (JSON, no newline needed), its reply line out
    /// (no newline): answered exactly as the control socket answers it. A `watch` here only
    /// gets its reply; the event stream is the caller's to follow (`events`).
    public func answer(controlLine: [UInt8]) -> [UInt8] { answer(controlLine: controlLine, startWatching: {}) }

    /// The same, answered later without a thread waiting: `reply` gets the reply line once the
    /// run has it (a `set` or a node's command when the node answers, at most 5 s later; anything
    /// else at once), on the thread that decided it.
    public func answer(controlLine: [UInt8], reply: @escaping @Sendable ([UInt8]) -> Void) {
        let line = Data(controlLine)
        switch ControlEnvelope.decode(line: line) {
        case .failure(let refusal):
            reply(ControlReply(.failure(refusal), id: ControlEnvelope.id(of: line)).line)
        case .success(let envelope):
            let id = envelope.id
            ControlCommands.handle(envelope.request, line: line, run: self, startWatching: {}) { reply(ControlReply($0, id: id).line) }
        }
    }

    /// What the socket calls: `startWatching` runs when the request is a `watch`.
    func answer(controlLine: [UInt8], startWatching: () -> Void) -> [UInt8] {
        let line = Data(controlLine)
        switch ControlEnvelope.decode(line: line) {
        case .failure(let refusal):
            return ControlReply(.failure(refusal), id: ControlEnvelope.id(of: line)).line
        case .success(let envelope):
            let outcome = PendingAnswer.waiting { reply in
                ControlCommands.handle(envelope.request, line: line, run: self, startWatching: startWatching, reply: reply)
            }
            return ControlReply(outcome, id: envelope.id).line
        }
    }

    /// A command of a node of this run (`AnswersControl`): the first node that declares it answers.
    func answerNodeCommand(_ command: String, line: Data, reply: @escaping @Sendable (ControlOutcome) -> Void) {
        let answering = runners.first { runner in
            (type(of: runner.node) as? any AnswersControl.Type)?.controlCommands.contains { $0.name == command } == true
        }
        guard let answering, answering.node is any AnswersControl else {
            let known = ControlRequest.builtIn + runners.flatMap { (type(of: $0.node) as? any AnswersControl.Type)?.controlCommands.map(\.name) ?? [] }
            // A node's command (`clip`) asked of a pipeline without such a node is unknown here.
            return reply(.failure(ControlRefusal("unknown command '\(command)': neither the run nor a node of this pipeline answers it"
                + (Suggest.hint(for: command, in: known).map { "; \($0)" } ?? ""))))
        }
        // Asked on the node's own thread, like a change: the node's state stays its thread's.
        let request = NodeControlRequest(command: command, line: line)
        let pending = PendingAnswer(reply)
        answering.ask { node in
            switch (node as? any AnswersControl)?.answer(request) ?? .refused("'\(command)' is not answered here") {
            case .done(let body): pending.settle(.success(body))
            case .refused(let message): pending.settle(.failure(ControlRefusal(message)))
            }
        }
        let name = answering.name
        pending.timeOut(after: ControlCommands.setTimeout) {
            .failure(ControlRefusal("'\(command)': node '\(name)' did not answer within \(Int(ControlCommands.setTimeout)) s (busy, stalled or ended)"))
        }
    }
}

/// A node's answer to one control question, handed from the node's thread to the control thread waiting for it.
final class NodeReply: Sendable {
    private let answer = ConditionLock<NodeControlAnswer?>(nil)

    func settle(_ a: NodeControlAnswer) {
        answer.withLockWakingAll { $0 = a }
    }

    /// The answer, or nil when none came within `seconds`.
    func wait(seconds: Double) -> NodeControlAnswer? {
        answer.wait(until: Monotonic.now + seconds) { $0 }
    }
}
