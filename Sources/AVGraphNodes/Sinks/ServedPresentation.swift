import AVGraph
import Foundation
import Synchronization

/// The route of a low-latency `hls` node on the run's server: its presentation's answers once
/// its writer has begun (the first packets of every input); a request before that waits for it
/// (a player opening the URL as the broadcast begins), 503 after `startWait`.
final class ServedPresentation: Sendable {
    private struct State {
        var presentation: LowLatencyPresentation?
        var waiting: [(id: Int, request: WebEndpoints.Request, deliver: @Sendable (WebEndpoints.Response) -> Void)] = []
        var nextId = 0
    }
    private let state = Mutex(State())
    static let startWait = 10.0

    func start(_ p: LowLatencyPresentation, node: String) {
        let waiting = state.withLock { s in
            s.presentation = p
            defer { s.waiting.removeAll() }
            return s.waiting
        }
        for w in waiting { w.deliver(Self.answer(w.request, node: node, by: p)) }
    }

    func answer(_ r: WebEndpoints.Request, node: String) -> WebEndpoints.Response {
        if let p = state.withLock({ $0.presentation }) { return Self.answer(r, node: node, by: p) }
        return .later { [self] deliver in
            let id = state.withLock { s -> Int? in
                guard s.presentation == nil else { return nil }
                s.nextId += 1
                s.waiting.append((s.nextId, r, deliver))
                return s.nextId
            }
            guard let id else { return deliver(answer(r, node: node)) }
            DispatchQueue.global().asyncAfter(deadline: .now() + Self.startWait) { [self] in
                let late = state.withLock { s in
                    s.waiting.firstIndex { $0.id == id }.map { s.waiting.remove(at: $0) }
                }
                late?.deliver(.text(503, "503: the presentation has not begun (no packet in \(Int(Self.startWait)) s)\n",
                                    headers: LowLatencyPresentation.cors.merging(["Retry-After": "1"]) { a, _ in a }))
            }
        }
    }

    private static func answer(_ r: WebEndpoints.Request, node: String, by p: LowLatencyPresentation) -> WebEndpoints.Response {
        let prefix = "/hls/\(node)/"
        guard r.path.hasPrefix(prefix) else {
            return .text(404, "404: the presentation's files are below \(prefix)\n", headers: LowLatencyPresentation.cors)
        }
        return p.answer(method: r.method, rest: String(r.path.dropFirst(prefix.count)), query: r.query)
    }
}
