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
            return ["ok": true, "node": node.name, "option": spec.name, "value": v.text]
        case "set":
            guard let (node, spec) = lookup(req, run) else { return lookupError(req, run) }
            guard spec.live else { return fail("option '\(spec.name)' of '\(node.name)' cannot change while running (not live)") }
            let value: OptionValue
            switch setValue(req, node: node.name, spec: spec) {
            case .success(let v): value = v
            case .failure(let refusal): return refusal.reply
            }
            let done = DispatchSemaphore(value: 0)
            let result = ResultBox()
            run.set(node: node.name, option: spec.name, value: value) { error in
                result.error = error
                done.signal()
            }
            if done.wait(timeout: .now() + 5) == .timedOut {
                return ["ok": true, "pending": true, "note": "the node applies it on its next frame or block"]
            }
            if let e = result.error { return fail("\(node.name).\(spec.name): \(e)") }
            return ["ok": true, "node": node.name, "option": spec.name, "value": value.text]
        case "clip":
            return run.clipCommand(req)
        default:
            return fail("unknown command '\(cmd)'" + (Suggest.hint(for: cmd, in: ["set", "get", "pause", "resume", "stop", "stats", "watch", "clip"]).map { "; \($0)" } ?? ""))
        }
    }

    final class ResultBox: @unchecked Sendable { var error: Error? }

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
