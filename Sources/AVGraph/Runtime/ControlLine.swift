import Foundation

extension PipelineRun {
    /// One request line of the control protocol in (JSON, no newline needed), its reply line out
    /// (no newline): answered exactly as the control socket answers it. A `watch` here only
    /// gets its reply; the event stream is the caller's to follow (`events`).
    public func answer(controlLine: [UInt8]) -> [UInt8] { answer(controlLine: controlLine, startWatching: {}) }

    /// What the socket calls: `startWatching` runs when the request is a `watch`.
    func answer(controlLine: [UInt8], startWatching: () -> Void) -> [UInt8] {
        let line = Data(controlLine)
        switch ControlEnvelope.decode(line: line) {
        case .failure(let refusal):
            return ControlReply(.failure(refusal), id: ControlEnvelope.id(of: line)).line
        case .success(let envelope):
            let outcome = ControlCommands.handle(envelope.request, line: line, run: self, startWatching: startWatching)
            return ControlReply(outcome, id: envelope.id).line
        }
    }

    /// A command of a node of this run (`AnswersControl`): the first node that declares it answers.
    func answerNodeCommand(_ command: String, line: Data) -> Result<any ControlReplyBody, ControlRefusal> {
        let answering = runners.first { runner in
            (type(of: runner.node) as? any AnswersControl.Type)?.controlCommands.contains(command) == true
        }
        guard let answering, let responder = answering.node as? any AnswersControl else {
            let known = ControlRequest.builtIn + runners.flatMap { (type(of: $0.node) as? any AnswersControl.Type)?.controlCommands ?? [] }
            // A node's command (`clip`) asked of a pipeline without such a node is unknown here.
            return .failure(ControlRefusal("unknown command '\(command)': neither the run nor a node of this pipeline answers it"
                + (Suggest.hint(for: command, in: known).map { "; \($0)" } ?? "")))
        }
        switch responder.answer(NodeControlRequest(command: command, line: line)) {
        case .done(let body): return .success(body)
        case .refused(let message): return .failure(ControlRefusal(message))
        }
    }
}
