import Foundation
import Synchronization

/// The latest picture a node emitted, kept by reference at most every `interval` seconds of
/// wall time, for a preview (the operator's page). The node's thread only takes a reference
/// under a lock; the reader encodes it on its own thread.
public final class PictureTap: Sendable {
    public let node: String
    let output: Int
    private let interval: Double
    private let kept = Mutex<(picture: Frame?, takenAt: Double)>((nil, -Double.infinity))

    init(node: String, output: Int, interval: Double) {
        self.node = node
        self.output = output
        self.interval = interval
    }

    func offer(_ frame: Frame, output: Int, clock: Double) {
        guard output == self.output else { return }
        kept.withLock { kept in
            guard clock - kept.takenAt >= interval else { return }
            kept = (frame.ref(), clock)
        }
    }

    /// The last picture kept (nil before the first), its pixels decoded if its source had not.
    public func latest() -> Frame? {
        guard let kept = kept.withLock({ $0.picture }) else { return nil }
        guard kept.awaitsPixels else { return kept }
        // A header of the caller's own: another request may be loading the kept one's.
        let picture = kept.ref()
        do { try picture.loadPixels() } catch { return nil }
        return picture
    }
}

extension PipelineRun {
    /// Starts keeping a preview picture: the output of the last node that covers pictures
    /// (privacy), else the raw video into the first video encoder, else the first raw video.
    /// What a viewer would see, after privacy. Call before `run()`; nil without raw video.
    public func tapPreview(interval: Double = 0.5) -> PictureTap? {
        let nodes = pipeline.nodes
        func rawVideo(_ i: Int) -> Int? { nodes[i].outputs.firstIndex { $0.kind == .rawVideo } }
        var chosen: (node: Int, output: Int)?
        if let i = nodes.indices.last(where: { nodes[$0].type.coversPictures && rawVideo($0) != nil }) {
            chosen = (i, rawVideo(i)!)
        } else if let encoder = nodes.first(where: { $0.outputs.contains { $0.kind == .encodedVideo } }),
                  let input = encoder.inputs.first, let i = nodes.firstIndex(where: { $0.name == input.from }),
                  nodes[i].outputs.indices.contains(input.fromOutput), nodes[i].outputs[input.fromOutput].kind == .rawVideo {
            chosen = (i, input.fromOutput)
        } else if let i = nodes.indices.first(where: { rawVideo($0) != nil }) {
            chosen = (i, rawVideo(i)!)
        }
        guard let chosen, chosen.node < runners.count else { return nil }
        let tap = PictureTap(node: nodes[chosen.node].name, output: chosen.output, interval: interval)
        runners[chosen.node].outlet.tap = tap
        return tap
    }
}
