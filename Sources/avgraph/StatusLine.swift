import AVGraph
import Foundation
import Synchronization

/// One line on the terminal, rewritten at each stats interval:
///
///     12.4s speed=1.00x 29.9 fps 2504 kbit/s drops 0 mem 95 MB (private 39) | queues upright→fit 1/1, mix→audio 3/32 (8 empty)
///
/// `speed` is media time over wall time (1.00x keeps up in realtime; offline, how much faster than
/// realtime); queues are named by their edge, and only those holding something are listed.
final class StatusLine: Sendable {
    let enabled: Bool
    let encoders: Set<String>
    let videoEncoders: Set<String>
    /// Touched by the thread that reports stats; a Mutex because the reporter is Sendable.
    private struct Rates {
        var last: (wall: Double, bytes: Int, frames: Int)?
        var fps = 0.0, kbps = 0.0
        var printed = false
    }
    private let rates = Mutex(Rates())

    init(pipeline: CheckedPipeline, enabled: Bool) {
        self.enabled = enabled
        encoders = Set(pipeline.nodes.filter { $0.outputs.contains { $0.kind.isEncoded } }.map(\.name))
        videoEncoders = Set(pipeline.nodes.filter { $0.outputs.contains { $0.kind == .encodedVideo } }.map(\.name))
    }

    func update(_ run: PipelineRun, _ stats: Event.Stats, wall: Double) {
        guard enabled else { return }
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + line(run.counters(), stats, wall: wall)).utf8))
        rates.withLock { $0.printed = true }
    }

    func line(_ counters: [NodeCounters], _ s: Event.Stats, wall: Double) -> String {
        var bytes = 0, frames = 0
        var busy: [String] = []
        var empty = 0
        for c in counters {
            if encoders.contains(c.name) { bytes += c.outputs.reduce(0) { $0 + $1.bytes } }
            if videoEncoders.contains(c.name) { frames += c.outputs.reduce(0) { $0 + $1.buffers } }
            for i in c.inputs {
                if i.depth > 0 { busy.append("\(i.from)→\(c.name) \(i.depth)/\(i.capacity)") } else { empty += 1 }
            }
        }
        // Rates over at least half a second: the final snapshot right after the flush would be noise.
        let (fps, kbps) = rates.withLock { r in
            if let last = r.last, wall - last.wall >= 0.5 {
                r.fps = Double(frames - last.frames) / (wall - last.wall)
                r.kbps = Double(bytes - last.bytes) * 8 / 1000 / (wall - last.wall)
                r.last = (wall, bytes, frames)
            } else if r.last == nil {
                r.last = (wall, bytes, frames)
            }
            return (r.fps, r.kbps)
        }
        let media = s.mediaTime
        let speed = wall > 0 ? media / wall : 0
        let queues = busy.isEmpty ? "all \(empty) empty" : busy.joined(separator: ", ") + (empty > 0 ? " (\(empty) empty)" : "")
        return String(format: "%.1fs speed=%.2fx %.1f fps %.0f kbit/s drops %d mem %.0f MB (private %.0f) | queues %@",
                      media, speed, fps, kbps, s.dropped, Double(s.rss) / 1_048_576,
                      Double(ProcessMemory.privateResidentBytes) / 1_048_576, queues)
    }

    func finish() {
        if rates.withLock({ $0.printed }) { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
