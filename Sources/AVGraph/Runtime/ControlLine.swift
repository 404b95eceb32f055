import Foundation

extension ControlCommands {
    /// One request line of the control socket, answered: nil for a blank line.
    static func answer(line: [UInt8], run: PipelineRun, startWatching: () -> Void) -> [String: Any]? {
        if line.allSatisfy({ $0 == 32 || $0 == 13 || $0 == 9 }) { return nil }
        guard let obj = try? JSONSerialization.jsonObject(with: Data(line)), let req = obj as? [String: Any] else {
            return ["ok": false, "error": "malformed request: expected one JSON object a line, like {\"cmd\": \"stats\"}"]
        }
        var answer = handle(req, run: run, startWatching: startWatching)
        if let id = req["id"] { answer["id"] = id }
        return answer
    }
}

extension PipelineRun {
    /// One control request (the JSON object a line of the control socket carries) in, its reply
    /// out as one JSON object without the newline: the same answer `ctl` gets, from the same
    /// code. `watch` needs a connection that stays open: over HTTP the events have their own stream.
    public func answer(controlLine line: [UInt8]) -> [UInt8] {
        var watching = false
        let reply = ControlCommands.answer(line: line, run: self) { watching = true }
            ?? ["ok": false, "error": "empty request: expected one JSON object, like {\"cmd\": \"stats\"}"]
        let object: [String: Any] = watching
            ? ["ok": false, "error": "watch needs the control socket; over HTTP the events stream from /api/events"] : reply
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{\"ok\":false}".utf8)
        return Array(data)
    }
}
