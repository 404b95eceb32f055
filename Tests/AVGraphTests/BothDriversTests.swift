@_spi(Testing) import AVGraph
import AVGraphNodes
import AVGraphTesting
import CFFmpeg
import Foundation
import Synchronization
import XCTest

/// Every built-in node type run twice, by the two ways the runtime drives a node: the threads of
/// a real `PipelineRun` (sources feeding the node, a `capture` sink taking what it emits) and the
/// `NodeHarness` on the test's thread, fed exactly what the node received in the run (a second
/// `capture` taps its inputs). A node with a live option gets the same timed change (`ctl set
/// ... --at 1`) in both. What comes out must be the same: per output the buffers' count, times,
/// sizes and a checksum of their pixels, samples or bytes; the node's events (`applied` with its
/// media time included); what a sink received and what it wrote. A node type with neither a case
/// nor a reason in `cannotRunBoth` fails the test, so a new node comes with its case.
final class BothDriversTests: XCTestCase {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Node types one of the two drivers cannot run with the same input, and why.
    static let cannotRunBoth: [String: String] = [
        "socket": "stamps what a producer process sends with the pipeline's wall clock at arrival: two runs see different media times",
        "app": "stamps what the embedding app pushes with the pipeline's wall clock at arrival: two runs see different media times",
        "screen": "grabs an X display at wall-clock times: two grabs are different media",
        "publisher": "reads what `avgraph serve` relays on standard input, once: there is no second copy for the other driver",
        "rtmp source": "needs a publisher connecting over the network at wall-clock times (RtmpSourceTests)",
        "srt source": "needs a publisher connecting over the network at wall-clock times (SrtSourceTests)",
        "whip": "needs a WebRTC publisher connecting over the network at wall-clock times (WhipTests)",
        "rtmp sink": "what comes out is on a server (LiveSinkTests, with nginx-rtmp)",
        "srt sink": "what comes out is on a server (LiveSinkTests, with srt-live-transmit)",
        "whep": "what comes out goes to WebRTC viewers over the network (WhepTests)",
        "h265": "x265's rate control runs across its frame threads as they finish: two encodes of the same pictures differ in bytes "
            + "(seen: 3447 against 3554 bytes at the third picture); HevcPassthroughTests and ConformanceTests check it",
    ]

    struct Case {
        var options: String
        /// Upstream node names connected to the node, in order (none for a source).
        var inputs: [String] = []
        /// A timed live change: option, value, media time.
        var change: (option: String, value: OptionValue, at: Double)? = nil
        /// Files the node writes, relative to its driver's folder (a sink): compared packet by packet.
        var writes: [String] = []
    }

    /// The nodes that feed the node under test: name, body, and the upstream nodes it takes.
    static let upstream: [(name: String, body: String, takes: [String])] = [
        ("camera", "type: testsrc, size: 320x240, rate: 30, duration: 2s, format: yuv420p, orientation: [{at: 0s, value: up}, {at: 1s, value: right}]", []),
        ("app", "type: tone, freq: 440, rate: 48000, channels: 2, duration: 2s", []),
        ("mic", "type: tone, freq: 880, rate: 44100, channels: 1, start: 0.5s, duration: 2s", []),
        ("video", "type: h264, in: camera, tune: zerolatency", ["camera"]),
        ("gops", "type: h264, in: camera, tune: zerolatency, keyframes: fixed, gop: 30", ["camera"]),
        ("audio", "type: aac, in: app", ["app"]),
    ]

    /// The `nodes:` lines of the upstream nodes `names` need.
    static func upstreamLines(_ names: [String]) -> String {
        var needed = Set<String>(), todo = names
        while let n = todo.popLast() {
            if needed.insert(n).inserted { todo += upstream.first { $0.name == n }?.takes ?? [] }
        }
        return upstream.filter { needed.contains($0.name) }.map { "  \($0.name): {\($0.body)}\n" }.joined()
    }

    func cases(_ media: String) -> [String: Case] {
        let assets = Self.packageRoot + "/assets"
        return [
            "testsrc": Case(options: "size: 320x240, rate: 30, duration: 2s, stalls: [{at: 0.5s, for: 0.3s}]"),
            "tone": Case(options: "duration: 2s, gaps: [{at: 0.5s, for: 0.25s}]"),
            "file source": Case(options: "path: \(media)/clip.mp4"),
            "rawvideo": Case(options: "path: \(media)/clip.yuv, size: 320x240"),
            "rawaudio": Case(options: "path: \(media)/clip.pcm"),
            "orient": Case(options: "", inputs: ["camera"]),
            "resize": Case(options: "size: 160x120, mode: fit", inputs: ["camera"]),
            "privacy": Case(options: "image: \(assets)/privacy.png, cards: {typing: \(assets)/typing.png}", inputs: ["camera"],
                            change: ("enabled", .bool(true), 1.0)),
            "fps": Case(options: "rate: 25", inputs: ["camera"]),
            "h264": Case(options: "tune: zerolatency", inputs: ["camera"], change: ("bitrate", .int(300_000), 1.0)),
            "meter": Case(options: "", inputs: ["app"], change: ("interval", .duration(0.25), 1.0)),
            "mixer": Case(options: "rate: 48000, channels: 2", inputs: ["app", "mic"], change: ("gain", .perInput(["mic": .number(0.25)]), 1.0)),
            "resample": Case(options: "rate: 44100, channels: 1", inputs: ["app"]),
            "aac": Case(options: "", inputs: ["app"]),
            "opus": Case(options: "", inputs: ["app"]),
            "null": Case(options: "", inputs: ["camera", "app"]),
            "file sink": Case(options: "path: out.mp4, overwrite: true", inputs: ["video", "audio"], writes: ["out.mp4"]),
            "clips": Case(options: "window: 2s", inputs: ["video", "audio"]),
            "hls": Case(options: "path: hls/master.m3u8, overwrite: true", inputs: ["gops", "audio"],
                        writes: ["hls/master.m3u8"]),
        ]
    }

    override func setUp() { FFmpegLog.errorsOnly() }

    func testEveryBuiltInNodeComesOutTheSameFromARunAndFromTheHarness() throws {
        let dir = TestSupport.scratch()
        let media = dir + "/media"
        try FileManager.default.createDirectory(atPath: media, withIntermediateDirectories: true)
        try TestSupport.ffmpeg(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30:duration=2", "-f", "lavfi", "-i", "sine=440:duration=2",
                                "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", media + "/clip.mp4"])
        try TestSupport.ffmpeg(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30:duration=2", "-pix_fmt", "yuv420p", "-f", "rawvideo", media + "/clip.yuv"])
        try TestSupport.ffmpeg(["-f", "lavfi", "-i", "sine=440:duration=2:sample_rate=48000", "-ac", "2", "-f", "s16le", media + "/clip.pcm"])
        let registry = BuiltinNodes.registry()
        try registry.register(CaptureSink.self)
        let cases = self.cases(media)
        var compared: [String] = []
        for type in BuiltinNodes.all {
            let key = registry.variants[type.typeName]!.count > 1 ? type.typeName + (type.inputs.isEmpty ? " source" : " sink") : type.typeName
            if Self.cannotRunBoth[key] != nil { continue }
            guard let c = cases[key] else {
                XCTFail("node type '\(key)' has no case here: add one to BothDriversTests.cases, or its reason to cannotRunBoth")
                continue
            }
            if type.options.contains(where: \.live) {
                XCTAssertNotNil(c.change, "\(key) has live options: its case sets one at a media time")
            }
            let problems = try compare(type, key: key, c, registry: registry, in: dir + "/" + key.replacingOccurrences(of: " ", with: "-"))
            XCTAssertEqual(problems, [], "\(key): the run and the harness differ:\n" + problems.joined(separator: "\n"))
            compared.append(key)
        }
        print("both drivers: \(compared.count) node types compared (\(compared.sorted().joined(separator: ", "))); "
              + "\(Self.cannotRunBoth.count) excluded (\(Self.cannotRunBoth.keys.sorted().joined(separator: ", ")))")
        XCTAssertEqual(compared.count + Self.cannotRunBoth.count, BuiltinNodes.all.count, "every built-in node is compared or excluded with a reason")
    }

    /// Runs `type` both ways; what differs, one line each.
    func compare(_ type: any Node.Type, key: String, _ c: Case, registry: NodeRegistry, in dir: String) throws -> [String] {
        let runDir = dir + "/run", harnessDir = dir + "/harness"
        for d in [runDir, harnessDir] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        CaptureSink.store.reset()

        // The run: upstream, the node, a capture of its outputs and a tap of its inputs.
        let isSink = type.outputs.isEmpty
        let outputs = type.outputs.count == 1 ? "node" : "[" + type.outputs.map { "node.\($0.name)" }.joined(separator: ", ") + "]"
        let node = "type: \(type.typeName)" + (c.inputs.isEmpty ? "" : ", in: [\(c.inputs.joined(separator: ", "))]")
            + (c.options.isEmpty ? "" : ", " + c.options)
        var pipe = "pipeline: both\nrealtime: false\nnodes:\n" + Self.upstreamLines(c.inputs) + "  node: {\(node)}\n"
        if !isSink { pipe += "  out: {type: capture, in: \(outputs)}\n" }
        if !c.inputs.isEmpty { pipe += "  tap: {type: capture, in: [\(c.inputs.joined(separator: ", "))]}\n" }
        try pipe.write(toFile: runDir + "/both.pipe", atomically: true, encoding: .utf8)
        let checked = Checker(registry: registry).check(path: runDir + "/both.pipe")
        guard checked.isValid else { return ["the pipe does not check: " + checked.diagnostics.map(\.description).joined(separator: "; ")] }
        let runEvents = CollectedEventLines()
        let log = EventLog(output: .none)
        log.addListener { runEvents.add($0) }
        let run = try PipelineRun(checked, events: log, realtime: false)
        if let change = c.change {
            run.set(node: "node", option: change.option, value: change.value, at: change.at) { error in
                if let error { XCTFail("\(key): the run refused the change: \(error)") }
            }
        }
        try run.run()
        let runOut = (0..<type.outputs.count).map { CaptureSink.store.get("out", $0) }
        let fed = (0..<c.inputs.count).map { CaptureSink.store.get("tap", $0) }

        // The harness: the same node, options and input formats, fed what the node got in the run.
        let formats = checked.node("node")!.inputs
        let h = try NodeHarness(type, options: c.options, inputs: formats.map { $0.format! }, inputNames: formats.map(\.from),
                                pads: formats.map(\.pad), realtime: false, baseDirectory: harnessDir)
        if let change = c.change { try h.set(change.option, change.value, at: change.at) }
        var harnessOut = Array(repeating: [MediaBuffer](), count: type.outputs.count)
        if c.inputs.isEmpty {
            var calls = 0
            while try h.produce() {
                calls += 1
                if calls > 100_000 { return ["the harness's source did not end"] }
            }
        } else {
            for (input, buffer) in Self.inTimeOrder(fed) { try h.feed(Self.newReference(buffer), input: input) }
            for i in fed.indices { try h.endInput(i) }
        }
        try h.finish()
        for o in harnessOut.indices { harnessOut[o] = h.emitted(o) }

        var problems: [String] = []
        for o in runOut.indices {
            let a = runOut[o].map(Self.describe), b = harnessOut[o].map(Self.describe)
            if a != b { problems.append("output \(o): " + Self.firstDifference(a, b)) }
            if a.isEmpty && !isSink { problems.append("output \(o): nothing came out of the run") }
        }
        let runLines = Self.nodeEvents(runEvents.lines, folder: runDir), harnessLines = Self.nodeEvents(h.eventLines, folder: harnessDir)
        if runLines != harnessLines { problems.append("events: " + Self.firstDifference(runLines, harnessLines)) }
        if let change = c.change, !runLines.contains(where: { $0.contains("\"applied\"") && $0.contains(change.option) }) {
            problems.append("the run announced no applied \(change.option)")
        }
        if isSink {
            let summary = runEvents.lines.compactMap { try? Event.decode(line: $0) }.compactMap { e -> Event.SinkSummary? in
                if case .eos(let eos) = e.kind { return eos.sinks.first { $0.node == "node" } }
                return nil
            }.first
            let received = h.received
            if summary?.bytes != received.bytes || summary?.frames != received.frames || summary?.mediaDuration != received.mediaDuration {
                problems.append("received: run \(String(describing: summary)), harness \(received)")
            }
        }
        for file in c.writes {
            let a = try Self.packets(runDir + "/" + file), b = try Self.packets(harnessDir + "/" + file)
            if a.isEmpty { problems.append("\(file): the run wrote no packets") }
            if a != b { problems.append("\(file): " + Self.firstDifference(a, b)) }
        }
        return problems
    }


    /// A second reference to the same media, as the run hands each consumer its own.
    static func newReference(_ b: MediaBuffer) -> MediaBuffer {
        switch b {
        case .frame(let f): .frame(f.ref())
        case .packet(let p): .packet(p.ref())
        }
    }

    /// The buffers of each input merged in media-time order (the first input first at a tie), as a run's inbox hands them on.
    static func inTimeOrder(_ inputs: [[MediaBuffer]]) -> [(Int, MediaBuffer)] {
        var next = [Int](repeating: 0, count: inputs.count)
        var merged: [(Int, MediaBuffer)] = []
        while true {
            var pick: Int?
            for i in inputs.indices where next[i] < inputs[i].count {
                if pick == nil || inputs[i][next[i]].time < inputs[pick!][next[pick!]].time { pick = i }
            }
            guard let i = pick else { return merged }
            merged.append((i, inputs[i][next[i]]))
            next[i] += 1
        }
    }

    /// One buffer as the comparison sees it: time, pts, size and a checksum of its media.
    static func describe(_ buffer: MediaBuffer) -> String {
        switch buffer {
        case .frame(let f):
            let size = f.sampleCount > 0 ? "\(f.sampleCount) samples \(f.sampleRate) Hz x\(f.channels)" : "\(f.width)x\(f.height) \(f.orientation)"
            return "frame t=\(f.time) pts=\(f.pts) \(size) sum=\(checksum(f))"
        case .packet(let p):
            let bytes = UnsafeBufferPointer(start: p.av.pointee.data, count: p.byteCount)
            return "packet t=\(p.time) pts=\(p.pts) dts=\(p.dts) key=\(p.isKeyframe) \(p.byteCount) bytes sum=\(fnv(bytes))"
        }
    }

    /// FNV-1a over the visible pixels (rows of each plane, no padding) or the samples of each plane.
    static func checksum(_ f: Frame) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        if f.sampleCount > 0 {
            let format = AVSampleFormat(rawValue: f.av.pointee.format)
            let planar = av_sample_fmt_is_planar(format) != 0
            let planeBytes = Int(av_get_bytes_per_sample(format)) * f.sampleCount * (planar ? 1 : f.channels)
            for p in 0..<(planar ? f.channels : 1) {
                guard let data = f.plane(p) else { continue }
                hash = fnv(UnsafeBufferPointer(start: data, count: planeBytes), hash)
            }
            return hash
        }
        let format = AVPixelFormat(rawValue: f.av.pointee.format)
        var lineSizes: [Int32] = [0, 0, 0, 0]
        av_image_fill_linesizes(&lineSizes, format, Int32(f.width))
        let descriptor = av_pix_fmt_desc_get(format)!.pointee
        for p in 0..<4 where lineSizes[p] > 0 {
            guard let data = f.plane(p) else { continue }
            let chroma = p == 1 || p == 2
            let rows = chroma ? (f.height + (1 << descriptor.log2_chroma_h) - 1) >> descriptor.log2_chroma_h : f.height
            for y in 0..<rows { hash = fnv(UnsafeBufferPointer(start: data + y * f.lineSize(p), count: Int(lineSizes[p])), hash) }
        }
        return hash
    }

    static func fnv(_ bytes: UnsafeBufferPointer<UInt8>, _ seed: UInt64 = 0xcbf2_9ce4_8422_2325) -> UInt64 {
        var hash = seed
        for b in bytes { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        return hash
    }

    /// The node's own events, without the wall-clock time of each and with the driver's folder in paths as `DIR`.
    static func nodeEvents(_ lines: [String], folder: String) -> [String] {
        lines.compactMap { line in
            guard var o = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any], o["node"] as? String == "node" else { return nil }
            o["wall"] = nil
            if let path = o["path"] as? String { o["path"] = path.replacingOccurrences(of: folder, with: "DIR") }
            return String(decoding: try! JSONSerialization.data(withJSONObject: o, options: [.sortedKeys]), as: UTF8.self)
        }
    }

    /// What ffprobe reads in a written file (a playlist: in every segment it names): each packet's stream, times, size, flags and checksum.
    static func packets(_ path: String) throws -> [String] {
        let text = try TestSupport.shell(["ffprobe", "-v", "error", "-show_entries", "packet=stream_index,pts,dts,duration,size,flags,data_hash",
                                          "-show_data_hash", "adler32", "-of", "csv=p=0", path])
        return text.split(separator: "\n").map(String.init).sorted()
    }

    static func firstDifference(_ a: [String], _ b: [String]) -> String {
        guard let i = a.indices.first(where: { $0 < b.count && a[$0] != b[$0] }) else {
            return "the run gave \(a.count), the harness \(b.count)" + (a.count > b.count ? "; the run's next: \(a[b.count])" : b.count > a.count ? "; the harness's next: \(b[a.count])" : "")
        }
        return "\(a.count) and \(b.count) in all; first difference at \(i):\n  run:     \(a[i])\n  harness: \(b[i])"
    }
}

/// Keeps what it receives, per input, for the comparison (`tap` and `out` of the pipe).
final class CaptureSink: Sink, Node {
    static let typeName = "capture"
    static let summary = "keeps every buffer it receives (tests)"
    static let inputs = [PadSpec("in", Set(MediaKind.allCases), variadic: true)]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }

    final class Store: Sendable {
        private let buffers = Mutex<[String: [Int: [MediaBuffer]]]>([:])
        func reset() { buffers.withLock { $0 = [:] } }
        func append(_ b: MediaBuffer, node: String, input: Int) { buffers.withLock { $0[node, default: [:]][input, default: []].append(b) } }
        func get(_ node: String, _ input: Int) -> [MediaBuffer] { buffers.withLock { $0[node]?[input] ?? [] } }
    }
    static let store = Store()

    let name: String
    init(_ setup: NodeSetup) throws { name = setup.name }
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { Self.store.append(buffer, node: name, input: input) }
}

final class CollectedEventLines: Sendable {
    private let kept = Mutex<[String]>([])
    func add(_ line: String) { kept.withLock { $0.append(line) } }
    var lines: [String] { kept.withLock { $0 } }
}
