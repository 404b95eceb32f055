import Foundation

/// A control request together with the type of its reply, so that asking `stats` for an option's
/// reply does not compile: what the async API (`PipelineRun.control(_:)`, `LivePipeline.control(_:)`) takes.
/// A node's own command names its reply type itself: `ControlCommand(ClipSave(path: p).request, reply: ClipSaved.self)`.
public struct ControlCommand<Reply: ControlReplyBody>: Sendable {
    public let request: ControlRequest

    public init(_ request: ControlRequest, reply: Reply.Type) { self.request = request }
}

extension ControlCommand where Reply == StatsReply {
    public static var stats: Self { .init(.stats, reply: StatsReply.self) }
}

extension ControlCommand where Reply == PipelineGraph {
    public static var graph: Self { .init(.graph, reply: PipelineGraph.self) }
}

extension ControlCommand where Reply == OptionReply {
    /// `value` as written in a `.pipe` file or as a JSON value; `at`: media seconds from which it applies.
    public static func set(node: String, option: String, value: EventValue, at: Double? = nil) -> Self {
        .init(.set(.init(node: node, option: option, value: value, at: at)), reply: OptionReply.self)
    }

    public static func get(node: String, option: String) -> Self {
        .init(.get(.init(node: node, option: option)), reply: OptionReply.self)
    }
}

extension ControlCommand where Reply == EmptyReply {
    public static var pause: Self { .init(.pause, reply: EmptyReply.self) }
    public static var resume: Self { .init(.resume, reply: EmptyReply.self) }
    public static func stop(reason: String? = nil) -> Self { .init(.stop(reason: reason), reply: EmptyReply.self) }
}

extension PipelineRun {
    /// Answers `command` as the control socket answers it, without leaving the process; throws the
    /// `ControlRefusal` the socket would send. A `set` is answered when the node takes the change
    /// (up to 5 s, as on the socket); meanwhile the caller is suspended and no thread waits.
    public func control<Reply>(_ command: ControlCommand<Reply>) async throws -> Reply {
        let request = command.request
        let outcome = await withCheckedContinuation { (done: CheckedContinuation<ControlOutcome, Never>) in
            ControlCommands.handle(request, line: ControlEnvelope(request).line, run: self, startWatching: {}) { done.resume(returning: $0) }
        }
        let body = try outcome.get()
        guard let reply = body as? Reply else {
            throw ControlRefusal("'\(request.command)' answered \(type(of: body)), not \(Reply.self)")
        }
        return reply
    }
}
