import Foundation

/// What the control socket understands. Each request is a JSON object with `cmd`:
/// `set` (node, option, value), `get` (node, option), `pause`, `resume`, `stop` (reason),
/// `stats`, `watch`, `clip` (action: save, path).
enum ControlCommands {
    static func handle(_ req: [String: Any], run: PipelineRun, startWatching: () -> Void) -> [String: Any] {
        guard let cmd = req["cmd"] as? String else { return fail("missing \"cmd\"") }
        switch cmd {
        case "stats":
            var s = run.statsSnapshot()
            s["ok"] = true
            s["paused"] = run.isPaused
            return s
        case "graph":
            var g = run.graphSnapshot()
            g["ok"] = true
            return g
        case "pause":
            return run.pause() ? ["ok": true] : fail("already paused")
        case "resume":
            return run.resume() ? ["ok": true] : fail("not paused")
        case "stop":
            run.stop(reason: req["reason"] as? String ?? "ctl stop")
            return ["ok": true]
        case "watch":
            startWatching()
            return ["ok": true, "watching": true]
        case "get":
            guard let (node, spec) = lookup(req, run) else { return lookupError(req, run) }
            guard let v = run.currentOption(node: node.name, option: spec.name) else { return fail("option '\(spec.name)' has no value") }
            return ["ok": true, "node": node.name, "option": spec.name, "value": Redaction.text(v.text)]
        case "set":
            guard let (node, spec) = lookup(req, run) else { return lookupError(req, run) }
            guard spec.live else { return fail("option '\(spec.name)' of '\(node.name)' cannot change while running (not live)") }
            let value: OptionValue
            switch setValue(req, node: node.name, spec: spec) {
            case .success(let v): value = v
            case .failure(let refusal): return refusal.reply
            }
            if req["at"] != nil {
                guard let at = mediaTime(req["at"]) else { return fail("\"at\" must be a media time in seconds (a number, or like \"12.5s\")") }
                // Due later: the answer says it is scheduled; a refusal when it comes due is a warning.
                let events = run.events
                run.set(node: node.name, option: spec.name, value: value, at: at) { error in
                    if let error { events.emit(.warning(.init("the change of \(spec.name) due at \(at) s was refused: \(error)")), node: node.name) }
                }
                return ["ok": true, "node": node.name, "option": spec.name, "value": Redaction.text(value.text), "at": at]
            }
            let done = DispatchSemaphore(value: 0)
            let result = ResultBox()
            let events = run.events
            run.set(node: node.name, option: spec.name, value: value) { error in
                // After the answer went out as a timeout, a refusal would be lost: say it as a warning.
                if result.settle(error), let error {
                    events.emit(.warning(.init("the change of \(spec.name) that timed out was refused: \(error)")), node: node.name)
                }
                done.signal()
            }
            if done.wait(timeout: .now() + setTimeout) == .timedOut, result.timeOut() {
                return fail("\(node.name).\(spec.name): not taken within \(Int(setTimeout)) s (the node is busy or stalled); "
                    + "it stays queued: an 'applied' event or a warning will tell")
            }
            if let e = result.error { return fail("\(node.name).\(spec.name): \(e)") }
            return ["ok": true, "node": node.name, "option": spec.name, "value": Redaction.text(value.text)]
        case "clip":
            return run.clipCommand(req)
        default:
            return fail("unknown command '\(cmd)'" + (Suggest.hint(for: cmd, in: ["set", "get", "pause", "resume", "stop", "stats", "watch", "clip", "graph"]).map { "; \($0)" } ?? ""))
        }
    }

    static let setTimeout = 5.0

    /// The outcome of a `set`, decided once: by the node (taken or refused) or by the timeout.
    final class ResultBox: @unchecked Sendable {
        private let lock = NSLock()
        private var decided = false
        private var timedOut = false
        private(set) var error: Error?

        /// The node's answer; true when it came after the timeout was answered.
        func settle(_ error: Error?) -> Bool {
            lock.lock(); defer { lock.unlock() }
            if decided { return timedOut }
            decided = true
            self.error = error
            return false
        }

        /// The timeout; false when the node's answer got in first.
        func timeOut() -> Bool {
            lock.lock(); defer { lock.unlock() }
            if decided { return false }
            decided = true
            timedOut = true
            return true
        }
    }

    struct Refusal: Error { var reply: [String: Any] }

    /// The `value` of a `set` request parsed as the option's type: all a client's bytes reach
    /// before the run is asked for anything (what the control fuzz target drives).
    static func setValue(_ req: [String: Any], node: String, spec: OptionSpec) -> Result<OptionValue, Refusal> {
        guard let raw = req["value"] else { return .failure(Refusal(reply: fail("missing \"value\""))) }
        let text: String
        switch raw {
        case let s as String: text = s
        case let b as Bool: text = b ? "true" : "false"
        case let n as NSNumber: text = n.stringValue
        default:
            guard let d = try? JSONSerialization.data(withJSONObject: raw), let s = String(data: d, encoding: .utf8) else {
                return .failure(Refusal(reply: fail("value must be a string, number, boolean, list or mapping")))
            }
            text = s
        }
        let (parsed, diags) = PipeLoader.parse(data: Data(text.utf8), file: "ctl")
        guard let parsed, diags.isEmpty else { return .failure(Refusal(reply: fail("cannot read value \(PipeValue.quoted(text))"))) }
        do { return .success(try spec.type.parse(parsed)) } catch {
            return .failure(Refusal(reply: fail("\(node).\(spec.name): \(error.message)" + (error.hint.map { " (\($0))" } ?? ""))))
        }
    }

    static func fail(_ message: String) -> [String: Any] { ["ok": false, "error": message] }

    /// A `set`'s `at`: seconds of media time, as a JSON number or a duration string.
    static func mediaTime(_ raw: Any?) -> Double? {
        let seconds: Double?
        switch raw {
        case let s as String: seconds = ValueSyntax.duration(s) ?? Double(s)
        case let n as NSNumber: seconds = n.doubleValue
        default: seconds = nil
        }
        guard let seconds, seconds.isFinite, seconds >= 0, seconds <= 1e9 else { return nil }
        return seconds
    }

    static func lookup(_ req: [String: Any], _ run: PipelineRun) -> (CheckedNode, OptionSpec)? {
        guard let name = req["node"] as? String, let option = req["option"] as? String,
              let node = run.pipeline.node(name), let spec = node.type.option(option) else { return nil }
        return (node, spec)
    }

    static func lookupError(_ req: [String: Any], _ run: PipelineRun) -> [String: Any] {
        guard let name = req["node"] as? String else { return fail("missing \"node\"") }
        guard let node = run.pipeline.node(name) else {
            return fail("no node named '\(name)'" + (Suggest.hint(for: name, in: run.pipeline.nodes.map(\.name)).map { "; \($0)" } ?? ""))
        }
        guard let option = req["option"] as? String else { return fail("missing \"option\"") }
        return fail("node '\(name)' (\(node.type.typeName)) has no option '\(option)'"
            + (Suggest.hint(for: option, in: node.type.options.map(\.name)).map { "; \($0)" } ?? ""))
    }
}
