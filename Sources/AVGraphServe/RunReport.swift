import AVGraph
import AVGraphNodes
import Foundation

/// What serve makes of its run's events (`run --events json`, one typed `Event` a line): the page
/// it serves for the index, the hooks its files and uploads become, its publisher gone, its end.
/// Pure: a line in, what it means out.
public struct RunReport: Sendable {
    /// What one event asks of the session.
    public enum Outcome: Sendable, Equatable {
        /// The run's operator page serves here (`page`).
        case page(String)
        /// A hook to post: its event name and fields (the session's own are added by the queue's poster).
        case hook(String, JSONObject)
        /// The run's source has had all its publisher (at `peer`) sent before leaving (`publisher`
        /// disconnected): what serve relayed is in the run.
        case publisherGone(String)
        /// The run ended (`eos`), for this reason.
        case ended(String)
    }

    /// File sinks' paths by node (the template filled in): the `recording` hook from `eos` when a
    /// run does not say its files itself.
    public let sinkPaths: [String: String]
    private var sawRecording = false

    public init(sinkPaths: [String: String]) { self.sinkPaths = sinkPaths }

    /// One line of the run's stdout; nothing for a line that is no event.
    public mutating func take(line: String) -> [Outcome] {
        guard let event = try? Event.decode(line: line) else { return [] }
        return take(event)
    }

    public mutating func take(_ event: Event) -> [Outcome] {
        let node: JSONObject = event.node.map { ["node": .string($0)] } ?? [:]
        if let r = event.kind.declared(RecordingEvent.self) {
            sawRecording = true
            return [.hook("recording", node.merging(["path": .string(r.path), "part": .int(r.part), "seconds": .number(r.seconds),
                                                      "bytes": .int(r.bytes), "frames": .int(r.frames), "finalized": .bool(r.finalized)]) { $1 })]
        }
        if let u = event.kind.declared(UploadedEvent.self) {
            return [.hook("upload", node.merging(["path": .string(u.path), "url": .string(u.url), "status": .int(u.status), "bytes": .int(u.bytes),
                                                   "attempts": .int(u.attempts), "seconds": .number(u.seconds)]) { $1 })]
        }
        if let p = event.kind.declared(PublisherEvent.self) {
            return p.state == .disconnected ? [.publisherGone(p.peer)] : []
        }
        switch event.kind {
        case .page(let p): return [.page(p.url)]
        case .eos(let eos):
            var out: [Outcome] = []
            if !sawRecording {
                for sink in eos.sinks {
                    guard let path = sinkPaths[sink.node] else { continue }
                    out.append(.hook("recording", ["node": .string(sink.node), "path": .string(path), "part": .int(1), "seconds": .number(sink.mediaDuration),
                                                   "bytes": .int(sink.bytes), "frames": .int(sink.frames), "finalized": .bool(true)]))
                }
            }
            return out + [.ended(eos.reason)]
        default: return []
        }
    }
}
