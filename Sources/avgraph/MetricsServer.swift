import AVGraph
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `run --metrics HOST:PORT`: Prometheus text exposition (format 0.0.4) at `/metrics`, on a
/// minimal HTTP/1.1 server of its own (one request per connection, one connection at a time:
/// a scraper every few seconds is the whole load). Loopback unless the user says otherwise.
final class MetricsServer: @unchecked Sendable {
    struct Address {
        var host: String
        var port: UInt16
        var isIPv6: Bool
        var isLoopback: Bool

        /// `127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`, `0.0.0.0:9464`.
        init?(_ text: String) {
            var host: Substring, portText: Substring
            if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
                host = text[text.index(after: text.startIndex)..<close]
                portText = text[text.index(close, offsetBy: 2)...]
            } else {
                guard let colon = text.lastIndex(of: ":") else { return nil }
                host = text[..<colon]
                portText = text[text.index(after: colon)...]
            }
            if host == "localhost" { host = "127.0.0.1" }
            guard let port = UInt16(portText), port > 0 else { return nil }
            self.host = String(host)
            self.port = port
            var v4 = in_addr(), v6 = in6_addr()
            if inet_pton(AF_INET, self.host, &v4) == 1 {
                isIPv6 = false
                isLoopback = UInt32(bigEndian: v4.s_addr) >> 24 == 127
            } else if inet_pton(AF_INET6, self.host, &v6) == 1 {
                isIPv6 = true
                isLoopback = self.host == "::1" || withUnsafeBytes(of: v6) { Array($0) } == Array(repeating: 0, count: 15) + [1]
            } else {
                return nil
            }
        }

        var url: String { isIPv6 ? "http://[\(host)]:\(port)/metrics" : "http://\(host):\(port)/metrics" }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    let address: Address
    private let fd: Int32
    private let run: PipelineRun
    private let closed = NSLock()
    private var isClosed = false

    init(_ address: Address, run: PipelineRun) throws {
        self.address = address
        self.run = run
        fd = socket(address.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "metrics: socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        if address.isIPv6 {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = address.port.bigEndian
            inet_pton(AF_INET6, address.host, &a.sin6_addr)
            bound = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = address.port.bigEndian
            inet_pton(AF_INET, address.host, &a.sin_addr)
            bound = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let why = String(cString: strerror(errno))
            Glibc.close(fd)
            throw Failure(description: "metrics: cannot listen on \(address.host):\(address.port): \(why)")
        }
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "metrics"
        thread.start()
    }

    func close() {
        closed.lock()
        defer { closed.unlock() }
        guard !isClosed else { return }
        isClosed = true
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
    }

    private func acceptLoop() {
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            // A client that sends nothing must not hold the next scrape for long.
            var tv = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            serve(client)
            Glibc.close(client)
        }
    }

    private func serve(_ client: Int32) {
        var request = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !request.containsHeaderEnd {
            let n = read(client, &chunk, chunk.count)
            if n <= 0 { return }
            request += chunk[0..<n]
            if request.count > 16384 { respond(client, 431, "request header too large\n"); return }
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        guard line.count == 3, line[2].hasPrefix("HTTP/1.") else { respond(client, 400, "bad request\n"); return }
        guard line[0] == "GET" || line[0] == "HEAD" else { respond(client, 405, "only GET\n", extra: "Allow: GET, HEAD\r\n"); return }
        let path = line[1].split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        guard path == "/metrics" else { respond(client, 404, "not found: try /metrics\n"); return }
        respond(client, 200, MetricsText.render(run), contentType: "text/plain; version=0.0.4; charset=utf-8", head: line[0] == "HEAD")
    }

    private func respond(_ client: Int32, _ status: Int, _ body: String, contentType: String = "text/plain; charset=utf-8",
                         extra: String = "", head: Bool = false) {
        let reason = [200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"][status] ?? ""
        let bytes = Array(body.utf8)
        var out = Array("HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(contentType)\r\nContent-Length: \(bytes.count)\r\n\(extra)Connection: close\r\n\r\n".utf8)
        if !head { out += bytes }
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }
}

private extension Array where Element == UInt8 {
    var containsHeaderEnd: Bool {
        guard count >= 4 else { return false }
        for i in 0...(count - 4) where self[i] == 13 && self[i + 1] == 10 && self[i + 2] == 13 && self[i + 3] == 10 { return true }
        return false
    }
}

/// The figures of a run in Prometheus' text format, one family per figure.
enum MetricsText {
    static func render(_ run: PipelineRun) -> String {
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
