import AVGraphTesting
import Foundation
import XCTest

/// Operating a running pipeline: `/metrics` read by Prometheus' own parser, `ctl NAME graph`
/// read by Graphviz, the status line on a real terminal.
final class OperatingTests: XCTestCase {
    /// Scrapes a URL (urllib) and parses it with prometheus_client's text parser; prints
    /// {"status": HTTP status, "content_type": ..., "samples": [[name, labels, value], ...]}.
    static let scrape = #"""
import json, sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    status, ctype, text = r.status, r.headers.get("Content-Type"), r.read().decode()
samples = []
types = {}
for family in text_string_to_metric_families(text):
    types[family.name] = family.type
    for s in family.samples:
        samples.append([s.name, s.labels, s.value])
print(json.dumps({"status": status, "content_type": ctype, "types": types, "samples": samples}))
"""#

    struct Scrape {
        var samples: [(name: String, labels: [String: String], value: Double)]
        var types: [String: String]
        func value(_ name: String, _ labels: [String: String]) -> Double? {
            samples.first { s in s.name == name && labels.allSatisfy { k, v in s.labels[k] == v } }?.value
        }
    }

    static func scrape(_ url: String) throws -> Scrape {
        let json = try PythonWitness.run(Self.scrape, [url]) as? [String: Any] ?? [:]
        XCTAssertEqual(json["status"] as? Int, 200)
        XCTAssertEqual(json["content_type"] as? String, "text/plain; version=0.0.4; charset=utf-8")
        let samples = (json["samples"] as? [[Any]] ?? []).map { s in
            (s[0] as? String ?? "", s[1] as? [String: String] ?? [:], (s[2] as? NSNumber)?.doubleValue ?? .nan)
        }
        return Scrape(samples: samples, types: json["types"] as? [String: String] ?? [:])
    }

    /// Waits until `url` answers (the run has started serving).
    static func waitForServer(port: Int, timeout: Double = 30) -> Bool {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = LoopbackPort.loopback(port)
            let ok = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(fd)
            if ok { return true }
            usleep(100_000)
        }
        return false
    }

    func livePipe(_ dir: String, rtmpPort: Int) -> String {
        let path = dir + "/ops.pipe"
        CLI.write("""
        pipeline: ops
        realtime: true
        duration: 30s
        control: \(dir)/ctl/ops.sock
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          app:    {type: tone, freq: 440, rate: 48000, channels: 2}
          fit:    {type: resize, in: screen, size: 640x360}
          video:  {type: h264, in: fit, bitrate: 800k, preset: ultrafast}
          audio:  {type: aac, in: app}
          out:    {type: file, in: [video, audio], path: out.mp4}
          live:   {type: rtmp, in: [video, audio], url: "rtmp://127.0.0.1:\(rtmpPort)/live/x", reconnect: {attempts: 1000, backoff: 1s}, buffer: 2s}
        """, to: path)
        return path
    }

    func testMetricsParseAsPrometheusTextAndCountersGrow() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        // Nobody listens on this port: the rtmp sink keeps media it cannot send and keeps trying.
        let deadPort = try LoopbackPort.free()
        let run = try BackgroundRun(["run", livePipe(dir, rtmpPort: deadPort), "--metrics", "127.0.0.1:\(port)", "--events", "json",
                                     "--stats-interval", "0.5"], cwd: dir)
        defer { if run.process.isRunning { run.process.terminate() } }
        XCTAssertTrue(Self.waitForServer(port: port), "no metrics server on \(port): \(run.stderr)")
        XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "stats" && ($0["media_time"] as? Double ?? 0) > 1 })
        let url = "http://127.0.0.1:\(port)/metrics"
        let first = try Self.scrape(url)
        // Wait for the media clock to move on by more than a second (the machine may be slow).
        let t0 = run.mediaTime
        XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "stats" && ($0["media_time"] as? Double ?? 0) > t0 + 2 })
        let second = try Self.scrape(url)

        XCTAssertEqual(first.types["avgraph_node_frames"], "counter")
        XCTAssertEqual(first.types["avgraph_node_dropped"], "counter")
        for node in ["screen", "app", "fit", "video", "audio", "out", "live"] {
            for kind in ["video", "audio"] {
                XCTAssertNotNil(second.value("avgraph_node_dropped_total", ["node": node, "kind": kind, "where": "queue"]), "\(node) has no drop counter")
            }
        }
        for (node, pad) in [("screen", "video"), ("app", "audio"), ("fit", "video"), ("video", "out"), ("audio", "audio")] {
            let a = first.value("avgraph_node_frames_total", ["node": node, "pad": pad]) ?? -1
            let b = second.value("avgraph_node_frames_total", ["node": node, "pad": pad]) ?? -1
            XCTAssertGreaterThan(a, 0, "\(node): no frames counted")
            // Over 2 s of media at 30 fps (audio: 1024-sample blocks at 48 kHz, ~47/s); the scrape
            // may come up to a stats interval (0.5 s) after the event.
            XCTAssertGreaterThan(b - a, 20, "\(node): frames did not grow (\(a) -> \(b))")
        }
        XCTAssertGreaterThan(second.value("avgraph_queue_capacity", ["node": "video", "from": "fit"]) ?? 0, 0)
        XCTAssertNotNil(second.value("avgraph_queue_depth", ["node": "out", "from": "audio", "pad": "in"]))
        XCTAssertGreaterThan(second.value("avgraph_process_resident_bytes", [:]) ?? 0, 10e6)
        let anon = second.value("avgraph_process_private_bytes", [:]) ?? 0
        XCTAssertGreaterThan(anon, 1e6)
        XCTAssertLessThan(anon, second.value("avgraph_process_resident_bytes", [:]) ?? 0)
        XCTAssertGreaterThan(second.value("avgraph_media_time_seconds", [:]) ?? 0, t0 + 1)
        // The live sink: no session could open, so no reconnect yet, and it holds what it could not send.
        XCTAssertEqual(second.value("avgraph_live_reconnects_total", ["node": "live"]), 0)
        XCTAssertGreaterThan(second.value("avgraph_live_buffered_seconds", ["node": "live"]) ?? 0, 0.3)

        // Other paths and methods get HTTP errors, not metrics; the run goes on.
        let notFound = try PythonWitness.run("""
        import urllib.request, urllib.error, json
        try:
            urllib.request.urlopen("http://127.0.0.1:\(port)/other", timeout=10); print(json.dumps(200))
        except urllib.error.HTTPError as e:
            print(json.dumps(e.code))
        """) as? Int
        XCTAssertEqual(notFound, 404)

        // The live picture of the same run: Graphviz reads it, every edge has its rate, queue and drops.
        let graph = try CLI.run(["ctl", dir + "/ctl/ops.sock", "graph"])
        XCTAssertEqual(graph.status, 0, graph.stderr)
        let edges = try GraphPictureTests.labelledEdges(graph.stdout)
        XCTAssertEqual(edges.count, 7, "\(edges)")
        let live = try NSRegularExpression(pattern: #"^[\d.]+ (fps|/s) · queue \d+/\d+ · \d+ dropped$"#)
        for e in edges {
            let lines = e.label.split(separator: "\n").map(String.init)
            XCTAssertEqual(lines.count, 2, "\(e)")
            let l = lines.last ?? ""
            XCTAssertEqual(live.numberOfMatches(in: l, range: NSRange(l.startIndex..., in: l)), 1, "\(e.from) -> \(e.to): '\(l)'")
        }
        let fitRate = edges.first { $0.from == "fit" && $0.to == "video" }?.label.split(separator: "\n").last.flatMap { Double($0.split(separator: " ")[0]) } ?? 0
        XCTAssertGreaterThan(fitRate, 10, "a realtime 30 fps edge runs at \(fitRate) fps")

        XCTAssertEqual(try CLI.run(["ctl", dir + "/ctl/ops.sock", "stop"]).status, 0)
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        // The recording is whole: the metrics server did not disturb the run.
        let frames = try CLI.videoFrameTimes(dir + "/out.mp4")
        XCTAssertGreaterThan(frames.count, 60)
    }

    /// A real RTMP server goes away and comes back: /metrics shows what the sink holds meanwhile,
    /// and counts the reconnect.
    func testLiveSinkReconnectsAndBufferShowInMetrics() throws {
        guard NginxRtmp.isAvailable else { XCTFail("nginx with the RTMP module is missing: run scripts/setup"); return }
        let nginx = try NginxRtmp()
        defer { nginx.stop() }
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        let run = try BackgroundRun(["run", livePipe(dir, rtmpPort: nginx.port), "--metrics", "127.0.0.1:\(port)", "--events", "json",
                                     "--stats-interval", "0.5", "--set", "live.buffer=10s"], cwd: dir)
        defer { if run.process.isRunning { run.process.terminate() } }
        let url = "http://127.0.0.1:\(port)/metrics"
        XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "stats" && ($0["media_time"] as? Double ?? 0) > 2 })
        XCTAssertEqual(try Self.scrape(url).value("avgraph_live_reconnects_total", ["node": "live"]), 0)
        nginx.stop()
        XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "disconnected" }, run.stderr)
        let lost = run.mediaTime
        XCTAssertNotNil(run.waitFor(timeout: 30) { $0["event"] as? String == "stats" && ($0["media_time"] as? Double ?? 0) > lost + 2 })
        let away = try Self.scrape(url)
        XCTAssertGreaterThan(away.value("avgraph_live_buffered_seconds", ["node": "live"]) ?? 0, 1.0, "media held while the server is away")
        XCTAssertEqual(away.value("avgraph_live_reconnects_total", ["node": "live"]), 0)
        try nginx.start()
        XCTAssertNotNil(run.waitFor(timeout: 60) { $0["event"] as? String == "reconnected" }, run.stderr)
        let back = try Self.scrape(url)
        XCTAssertEqual(back.value("avgraph_live_reconnects_total", ["node": "live"]), 1)
        XCTAssertEqual(try CLI.run(["ctl", dir + "/ctl/ops.sock", "stop"]).status, 0)
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
    }

    func testMetricsAddressMustBeLoopbackUnlessAllowed() throws {
        let remote = try CLI.run(["run", "pipelines/live.pipe", "--metrics", "0.0.0.0:9464"], cwd: CLI.packageRoot)
        XCTAssertEqual(remote.status, 2)
        XCTAssertTrue(remote.stderr.contains("not a loopback address: add --metrics-allow-remote"), remote.stderr)
        let bad = try CLI.run(["run", "pipelines/live.pipe", "--metrics", "9464"], cwd: CLI.packageRoot)
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("--metrics takes HOST:PORT"), bad.stderr)
        // A port in use is an error at once, naming it.
        let port = try LoopbackPort.free()
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var addr = LoopbackPort.loopback(port)
        _ = withUnsafePointer(to: &addr) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        listen(holder, 1)
        let busy = try CLI.run(["run", "pipelines/live.pipe", "--duration", "1s", "--metrics", "127.0.0.1:\(port)"], cwd: CLI.packageRoot)
        XCTAssertEqual(busy.status, 1)
        XCTAssertTrue(busy.stderr.contains("metrics: cannot listen on 127.0.0.1:\(port)"), busy.stderr)
    }

    /// The status line on a real terminal (a pty from `script`): labelled queues, speed, bitrate,
    /// drops, memory; `--stats-interval` sets how often it is rewritten.
    func testStatusLineOnATerminal() throws {
        let dir = CLI.scratch()
        CLI.write("""
        realtime: true
        duration: 3s
        control: \(dir)/ctl/ops.sock
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          fit:    {type: resize, in: screen, size: 640x360}
          video:  {type: h264, in: fit, bitrate: 800k, preset: ultrafast}
          out:    {type: file, in: [video], path: out.mp4}
        """, to: dir + "/status.pipe")
        let command = "\(CLI.binary) run \(dir)/status.pipe --stats-interval 0.25"
        let typescript = String(decoding: try CLI.capture(["script", "-qec", command, "/dev/null"]), as: UTF8.self)
        // The reporter's own lines (warnings, the final summary) also start by clearing the status line.
        let lines = typescript.components(separatedBy: "\r\u{1B}[K").dropFirst().map { $0.components(separatedBy: "\n")[0] }
            .filter { !$0.hasPrefix("avgraph:") }
        // 3 s of realtime media at 4 lines a second: at least 8 however slow the machine (wall >= media).
        XCTAssertGreaterThanOrEqual(lines.count, 8, typescript)
        let line = try NSRegularExpression(pattern:
            #"^\d+\.\ds speed=\d+\.\d\dx [\d.]+ fps \d+ kbit/s drops \d+ mem \d+ MB \(private \d+\) \| queues (all 3 empty|.*(screen|fit|video)→(fit|video|out) \d+/\d+.*)"#)
        for l in lines {
            let clean = l.trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertEqual(line.numberOfMatches(in: clean, range: NSRange(clean.startIndex..., in: clean)), 1, "status line: '\(clean)'")
        }
        // Speed is media over wall time since the start, node setup included: about 1x.
        let speeds = lines.compactMap { l in l.range(of: #"speed=(\d+\.\d+)x"#, options: .regularExpression).flatMap { Double(l[$0].dropFirst(6).dropLast()) } }
        XCTAssertTrue(speeds.contains { (0.8...1.05).contains($0) }, "a realtime run goes at 1x: \(lines)")
        XCTAssertTrue(typescript.contains("avgraph: status ended after"), typescript)
        XCTAssertGreaterThan(try CLI.videoFrameTimes(dir + "/out.mp4").count, 80)
    }
}
