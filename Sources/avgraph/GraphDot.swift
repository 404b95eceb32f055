import AVGraph
import Foundation

/// Graphviz DOT of a pipeline graph (`CheckedPipeline.graph`, or a running pipeline's
/// `graph` reply): a box per node with its type and the options the file sets, an arrow per
/// edge labelled with its negotiated format and, when running, its rate, queue and drops.
/// Plugin nodes are drawn apart (a dashed box naming the plugin).
enum GraphDot {
    static func render(_ graph: PipelineGraph) -> String {
        var out = """
        digraph \(quote(graph.pipeline)) {
          rankdir=LR;
          graph [fontname="Helvetica", fontsize=12, label=\(quote(title(graph))), labelloc=t];
          node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];
          edge [fontname="Helvetica", fontsize=9];

        """
        for n in graph.nodes {
            var lines = ["\(n.name)  (\(n.type))"]
            for key in n.options.keys.sorted() { lines.append("\(key): \(short(n.options[key]!))") }
            var attributes = ["fillcolor=\(quote(fill(n.role)))"]
            if let plugin = n.plugin {
                lines.append("[plugin \((plugin as NSString).lastPathComponent)]")
                attributes = ["fillcolor=\"#fde9c9\"", "style=\"rounded,filled,dashed\"", "penwidth=2"]
            }
            out += "  \(quote(n.name)) [label=\(quote(lines.joined(separator: "\n"))), \(attributes.joined(separator: ", "))];\n"
        }
        // A node with several outputs (a file's video and audio): name the pad at the arrow's tail.
        let pads = Dictionary(grouping: graph.edges, by: \.from).mapValues { Set($0.map(\.fromPad)) }
        for e in graph.edges {
            var lines = [e.format ?? "(format unknown)"]
            if let live = liveText(e) { lines.append(live) }
            var attributes = ["label=\(quote(lines.joined(separator: "\n")))"]
            if e.kind?.contains("audio") == true { attributes.append("color=\"#3b6fb6\"") }
            if e.dropped ?? 0 > 0 { attributes.append("fontcolor=\"#b00020\"") }
            if pads[e.from]?.count ?? 0 > 1 { attributes.append("taillabel=\(quote(e.fromPad))") }
            out += "  \(quote(e.from)) -> \(quote(e.to)) [\(attributes.joined(separator: ", "))];\n"
        }
        return out + "}\n"
    }

    static func title(_ graph: PipelineGraph) -> String {
        guard let t = graph.mediaTime else { return graph.pipeline }
        return String(format: "%@ — running, media time %.1f s", graph.pipeline, t)
    }

    /// `29.9 fps · queue 1/3 · 0 dropped` (buffers a second for audio and packets).
    static func liveText(_ e: PipelineGraph.Link) -> String? {
        var parts: [String] = []
        if let rate = e.rate {
            parts.append(String(format: "%.1f %@", rate, (e.kind ?? "").contains("video") ? "fps" : "/s"))
        }
        if let q = e.queue, let c = e.capacity { parts.append("queue \(q)/\(c)") }
        if let d = e.dropped { parts.append("\(d) dropped") }
        return parts.isEmpty ? nil : parts.joined(separator: " · ")
    }

    static func fill(_ role: String) -> String {
        switch role {
        case "source": return "#e3f1e0"
        case "sink": return "#f3e3ef"
        default: return "#e8eef8"
        }
    }

    static func short(_ s: String) -> String { s.count > 40 ? String(s.prefix(39)) + "…" : s }

    static func quote(_ s: String) -> String {
        "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n") + "\""
    }
}
