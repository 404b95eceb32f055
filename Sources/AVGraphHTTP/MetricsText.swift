import AVGraph
import Foundation

/// The figures of a run in Prometheus' text format, one family per figure.
public enum MetricsText {
    public static func render(_ run: PipelineRun) -> String {
        let pipeline = run.pipeline.settings.name
        let counters = run.counters()
        var families: [(name: String, type: String, help: String, samples: [(labels: [(String, String)], value: Double)])] = []
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: [(String, String)], value: Double)]) {
            families.append((name, type, help, samples))
        }
        func node(_ c: NodeCounters) -> [(String, String)] { [("pipeline", pipeline), ("node", c.name), ("type", c.type)] }

        family("avgraph_node_frames_total", "counter", "Frames, audio blocks or packets a node emitted, per output pad.",
               counters.flatMap { c in c.outputs.map { (node(c) + [("pad", $0.pad)], Double($0.buffers)) } })
        family("avgraph_node_bytes_total", "counter", "Bytes of media a node emitted, per output pad.",
               counters.flatMap { c in c.outputs.map { (node(c) + [("pad", $0.pad)], Double($0.bytes)) } })
        family("avgraph_node_media_time_seconds", "gauge", "Media time of the last buffer a node emitted, per output pad.",
               counters.flatMap { c in c.outputs.compactMap { o in o.mediaTime.map { (node(c) + [("pad", o.pad)], $0) } } })
        // Every node has both kinds at both places, zero or not: a scraper sees the series from the start.
        family("avgraph_node_dropped_total", "counter",
               "Media dropped, by kind (video/audio) and where: on the node's input queues (queue) or by the node itself (node).",
               counters.flatMap { c -> [(labels: [(String, String)], value: Double)] in
                   var queue = (video: 0, audio: 0)
                   for i in c.inputs { if i.kind.isVideo { queue.video += i.dropped } else { queue.audio += i.dropped } }
                   let own = c.ownDrops.reduce(into: (video: 0, audio: 0)) { if $1.key.isVideo { $0.video += $1.value } else { $0.audio += $1.value } }
                   return [(node(c) + [("kind", "video"), ("where", "queue")], Double(queue.video)),
                           (node(c) + [("kind", "audio"), ("where", "queue")], Double(queue.audio)),
                           (node(c) + [("kind", "video"), ("where", "node")], Double(own.video)),
                           (node(c) + [("kind", "audio"), ("where", "node")], Double(own.audio))]
               })
        family("avgraph_queue_depth", "gauge", "Items waiting on an edge's queue (labelled by its consumer node and upstream).",
               counters.flatMap { c in c.inputs.map { (node(c) + [("from", $0.from), ("pad", $0.pad)], Double($0.depth)) } })
        family("avgraph_queue_capacity", "gauge", "Capacity of an edge's queue.",
               counters.flatMap { c in c.inputs.map { (node(c) + [("from", $0.from), ("pad", $0.pad)], Double($0.capacity)) } })
        let live = counters.filter { $0.gauges["reconnects"] != nil }
        family("avgraph_live_reconnects_total", "counter", "Times a live network sink opened its session again after it broke.",
               live.map { (node($0), $0.gauges["reconnects"] ?? 0) })
        family("avgraph_live_buffered_seconds", "gauge", "Seconds of media a live network sink holds that the network has not taken yet.",
               live.map { (node($0), $0.gauges["buffered_seconds"] ?? 0) })
        let stats = run.stats()
        let p = [("pipeline", pipeline)]
        family("avgraph_media_time_seconds", "gauge", "Media time the pipeline has reached.", [(p, stats.mediaTime)])
        family("avgraph_wall_seconds", "gauge", "Seconds since the run started.", [(p, run.clock)])
        family("avgraph_queued_bytes", "gauge", "Bytes of media queued on the edges and held by nodes (against memory-limit).",
               [(p, Double(stats.queuedBytes))])
        family("avgraph_memory_limit_bytes", "gauge", "The pipeline's memory-limit.", [(p, Double(run.pipeline.settings.memoryLimit))])
        family("avgraph_process_resident_bytes", "gauge", "Resident memory of the process (VmRSS).", [(p, Double(ProcessMemory.residentBytes))])
        family("avgraph_process_private_bytes", "gauge", "Private resident memory of the process (RssAnon).",
               [(p, Double(ProcessMemory.privateResidentBytes))])

        var out = ""
        for f in families where !f.samples.isEmpty {
            out += "# HELP \(f.name) \(f.help)\n# TYPE \(f.name) \(f.type)\n"
            for s in f.samples {
                let labels = s.labels.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",")
                out += "\(f.name){\(labels)} \(number(s.value))\n"
            }
        }
        return out
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }

    static func number(_ v: Double) -> String {
        if v.isNaN { return "NaN" }
        if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
        return v == v.rounded() && abs(v) < 1e15 ? String(Int(v)) : String(v)
    }
}
