import Foundation

/// Graphviz DOT of a pipeline graph (`CheckedPipeline.graphJSON`, or a running pipeline's
/// `graph` reply): a box per node with its type and the options the file sets, an arrow per
/// edge labelled with its negotiated format and, when running, its rate, queue and drops.
/// Plugin nodes are drawn apart (a dashed box naming the plugin).
enum GraphDot {
    static func render(_ graph: [String: Any]) -> String {
        let name = graph["pipeline"] as? String ?? "pipeline"
        var out = """
        digraph \(quote(name)) {
          rankdir=LR;
          graph [fontname="Helvetica", fontsize=12, label=\(quote(title(graph))), labelloc=t];
          node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];
          edge [fontname="Helvetica", fontsize=9];

        """
        for n in graph["nodes"] as? [[String: Any]] ?? [] {
            let node = n["name"] as? String ?? "?"
            var lines = ["\(node)  (\(n["type"] as? String ?? "?"))"]
            let options = n["options"] as? [String: String] ?? [:]
            for key in options.keys.sorted() { lines.append("\(key): \(short(options[key]!))") }
            var attributes = ["fillcolor=\(quote(fill(n["role"] as? String)))"]
            if let plugin = n["plugin"] as? String {
                lines.append("[plugin \((plugin as NSString).lastPathComponent)]")
                attributes = ["fillcolor=\"#fde9c9\"", "style=\"rounded,filled,dashed\"", "penwidth=2"]
            }
            out += "  \(quote(node)) [label=\(quote(lines.joined(separator: "\n"))), \(attributes.joined(separator: ", "))];\n"
        }
        let edges = graph["edges"] as? [[String: Any]] ?? []
        // A node with several outputs (a file's video and audio): name the pad at the arrow's tail.
        let pads = Dictionary(grouping: edges, by: { $0["from"] as? String ?? "" }).mapValues { Set($0.compactMap { $0["from_pad"] as? String }) }
        for e in edges {
            var lines = [e["format"] as? String ?? "(format unknown)"]
            if let live = liveText(e) { lines.append(live) }
            var attributes = ["label=\(quote(lines.joined(separator: "\n")))"]
            if (e["kind"] as? String)?.contains("audio") == true { attributes.append("color=\"#3b6fb6\"") }
            if e["dropped"] as? Int ?? 0 > 0 { attributes.append("fontcolor=\"#b00020\"") }
            if let pad = e["from_pad"] as? String, pads[e["from"] as? String ?? ""]?.count ?? 0 > 1 {
                attributes.append("taillabel=\(quote(pad))")
            }
            out += "  \(quote(e["from"] as? String ?? "?")) -> \(quote(e["to"] as? String ?? "?")) [\(attributes.joined(separator: ", "))];\n"
        }
        return out + "}\n"
    }

    static func title(_ graph: [String: Any]) -> String {
        let name = graph["pipeline"] as? String ?? "pipeline"
        guard let t = graph["media_time"] as? Double else { return name }
        return String(format: "%@ — running, media time %.1f s", name, t)
    }

    /// `29.9 fps · queue 1/3 · 0 dropped` (buffers a second for audio and packets).
    static func liveText(_ e: [String: Any]) -> String? {
        var parts: [String] = []
        if let rate = e["rate"] as? Double {
            parts.append(String(format: "%.1f %@", rate, (e["kind"] as? String ?? "").contains("video") ? "fps" : "/s"))
        }
        if let q = e["queue"] as? Int, let c = e["capacity"] as? Int { parts.append("queue \(q)/\(c)") }
        if let d = e["dropped"] as? Int { parts.append("\(d) dropped") }
        return parts.isEmpty ? nil : parts.joined(separator: " · ")
    }

    static func fill(_ role: String?) -> String {
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
