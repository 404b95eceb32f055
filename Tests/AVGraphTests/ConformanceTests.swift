import AVGraph
import AVGraphNodes
import AVGraphTesting
import Foundation
import XCTest

/// Every built-in node type through the conformance verifier (AVGraphTesting.Conformance): burst
/// and drip-fed input, an early end, abort then finish, every live option's `applied`. A node type
/// without a case here fails the test, so a new node comes with its case.
final class ConformanceTests: XCTestCase {
    static let video = StreamFormat.video(width: 320, height: 240, pixelFormat: "yuv420p", frameRate: Rational(30, 1))
    static let audio = StreamFormat.audio(sampleRate: 48000, channels: 2, sampleFormat: "fltp")
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    let registry = BuiltinNodes.registry()
    func t(_ name: String) -> any Node.Type { registry[name]! }

    /// Encoded video and audio made by the built-in encoders from the raw test media.
    func encoded(h264Options: String = "") throws -> (video: ConformanceCase.Feed, audio: ConformanceCase.Feed) {
        let h264 = try NodeHarness(registry["h264"]!, options: "tune: zerolatency" + h264Options, inputs: [Self.video])
        for b in try Conformance.rawVideo(Self.video) { try h264.feed(b) }
        try h264.endAll()
        let aac = try NodeHarness(registry["aac"]!, inputs: [Self.audio])
        for b in try Conformance.rawAudio(Self.audio) { try aac.feed(b) }
        try aac.endAll()
        return (.init(format: h264.outputFormats[0], name: "video", buffers: h264.emitted()),
                .init(format: aac.outputFormats[0], name: "audio", buffers: aac.emitted()))
    }

    func cases(_ dir: String, display: String?) throws -> [String: ConformanceCase] {
        let raw = ConformanceCase.Feed(format: Self.video, name: "camera", buffers: try Conformance.rawVideo(Self.video))
        let app = ConformanceCase.Feed(format: Self.audio, name: "app", buffers: try Conformance.rawAudio(Self.audio))
        let mic = ConformanceCase.Feed(format: Self.audio, name: "mic", buffers: try Conformance.rawAudio(Self.audio, seconds: 1.5))
        let (v, a) = try encoded()
        // Files the file-reading sources read: 2 s of media each.
        let clip = dir + "/clip.mp4", yuv = dir + "/clip.yuv", pcm = dir + "/clip.pcm"
        try ffmpeg(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30:duration=2", "-f", "lavfi", "-i", "sine=440:duration=2",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", clip])
        try ffmpeg(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30:duration=2", "-pix_fmt", "yuv420p", "-f", "rawvideo", yuv])
        try ffmpeg(["-f", "lavfi", "-i", "sine=440:duration=2:sample_rate=48000", "-ac", "2", "-f", "s16le", pcm])
        let nowhere = try LoopbackPort.free()
        let unreachable = "reconnect: {attempts: 0, backoff: 100ms..100ms}, timeout: 1s"
        var c: [String: ConformanceCase] = [
            "testsrc": .init(t("testsrc"), options: "size: 320x240, duration: 2s"),
            "tone": .init(t("tone"), options: "duration: 2s"),
            "file source": .init(registry.resolve("file", hasInputs: false)!, options: "path: \(clip)"),
            "rawvideo": .init(t("rawvideo"), options: "path: \(yuv), size: 320x240"),
            "rawaudio": .init(t("rawaudio"), options: "path: \(pcm)"),
            "socket": .init(t("socket"), options: "path: \(dir)/in.sock, size: 320x240", produceLimit: 10, expectsOutput: false),
            "app": .init(t("app"), options: "size: 320x240", produceLimit: 10, expectsOutput: false),
            "orient": .init(t("orient"), inputs: [raw]),
            "resize": .init(t("resize"), options: "size: 160x120, mode: fit", inputs: [raw]),
            "privacy": .init(t("privacy"), options: "image: \(Self.packageRoot)/assets/privacy.png, cards: {typing: \(Self.packageRoot)/assets/typing.png}",
                             inputs: [raw], liveValues: ["card": .string("typing")]),
            "fps": .init(t("fps"), options: "rate: 25", inputs: [raw]),
            "h264": .init(t("h264"), inputs: [raw]),
            "h265": .init(t("h265"), inputs: [raw]),
            "meter": .init(t("meter"), inputs: [app]),
            "mixer": .init(t("mixer"), inputs: [app, mic]),
            "resample": .init(t("resample"), options: "rate: 44100, channels: 1", inputs: [app]),
            "aac": .init(t("aac"), inputs: [app]),
            "opus": .init(t("opus"), inputs: [app]),
            "null": .init(t("null"), inputs: [raw, app]),
            "file sink": .init(registry.resolve("file", hasInputs: true)!, options: "path: \(dir)/out.mp4, overwrite: true", inputs: [v, a]),
            "clips": .init(t("clips"), inputs: [v, a]),
            // In a harness there is no --http server: it takes its packets and sends them nowhere.
            "whep": .init(t("whep"), inputs: [v]),
            // Renditions for HLS come from encoders with keyframes at fixed times (2 s at the default gop).
            "hls": .init(t("hls"), options: "path: \(dir)/hls/master.m3u8, overwrite: true", inputs: [try encoded(h264Options: ", keyframes: fixed").video, a]),
            "rtmp sink": .init(registry.resolve("rtmp", hasInputs: true)!, options: "url: rtmp://127.0.0.1:\(nowhere)/live/x, \(unreachable)",
                               inputs: [v, a], finishMayThrow: true),
            "srt sink": .init(registry.resolve("srt", hasInputs: true)!, options: "url: srt://127.0.0.1:\(nowhere), \(unreachable)",
                              inputs: [v, a], finishMayThrow: true),
            // Listening with nobody publishing: they wait, emit nothing, and stop when asked.
            "rtmp source": .init(registry.resolve("rtmp", hasInputs: false)!, options: "url: rtmp://127.0.0.1:\(try LoopbackPort.free())/live/x, listen: true",
                                 produceLimit: 10, expectsOutput: false),
            "srt source": .init(registry.resolve("srt", hasInputs: false)!, options: "url: srt://127.0.0.1:\(try LoopbackPort.free()), listen: true",
                                produceLimit: 10, expectsOutput: false),
            "whip": .init(registry.resolve("whip", hasInputs: false)!, options: "url: whip://127.0.0.1:\(try LoopbackPort.free()), keys: [x]",
                          produceLimit: 10, expectsOutput: false),
        ]
        // Its relay is standard input: an open pipe nobody writes to, as a run whose publisher has not sent yet.
        c["publisher"] = .init(t("publisher"), options: "idle: 30s", produceLimit: 10, expectsOutput: false)
        if let display { c["screen"] = .init(t("screen"), options: "display: \"\(display)\", region: \"0,0,320x240\", duration: 1s", realtime: true, countTolerance: 0.1) }
        return c
    }

    override func setUp() { FFmpegLog.errorsOnly() }

    func testEveryBuiltInNodeTypeConforms() throws {
        let dir = TestSupport.scratch()
        let display = try? XDisplay()
        defer { display?.stop() }
        let cases = try self.cases(dir, display: display?.name)
        let relay = try QuietStandardInput()
        defer { relay.restore() }
        let types = registry.variants.values.flatMap { $0 }
        var checked = 0
        for type in types {
            let key = registry.variants[type.typeName]!.count > 1 ? type.typeName + (type.inputs.isEmpty ? " source" : " sink") : type.typeName
            guard let c = cases[key] else {
                if type.typeName == "screen" && display == nil { continue } // Xvfb missing: said by XDisplay
                XCTFail("no conformance case for node type '\(key)': add one to ConformanceTests.cases")
                continue
            }
            XCTAssertTrue(c.type == type, "case '\(key)' is for \(c.type.typeName)")
            let problems = Conformance.verify(c)
            XCTAssertEqual(problems, [], "\(key) does not conform:\n" + problems.joined(separator: "\n"))
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, types.count - (display == nil ? 1 : 0))
    }

    /// The verifier catches what it is for: a node that emits out of order and forgets live changes.
    func testTheVerifierCatchesABrokenNode() throws {
        let raw = ConformanceCase.Feed(format: Self.video, name: "camera", buffers: try Conformance.rawVideo(Self.video, count: 10))
        let problems = Conformance.verify(.init(BackwardsNode.self, inputs: [raw]))
        XCTAssertTrue(problems.contains { $0.contains("burst") && $0.contains("after") }, "\(problems)")
        XCTAssertTrue(problems.contains { $0.contains("drip: emitted") }, "\(problems)")
        XCTAssertTrue(problems.contains { $0.contains("live flip: threw: cannot flip now") }, "\(problems)")
        XCTAssertTrue(problems.contains { $0.contains("burst: emitted event 'stray', which its type does not declare") }, "\(problems)")
        XCTAssertTrue(problems.contains { $0.contains("declared events: event 'held' writes 'count', which its fields do not list") }, "\(problems)")
        XCTAssertTrue(problems.contains { $0.contains("declared events: event 'held' lists required 'pictures', which its example does not write") },
                      "\(problems)")
    }

    func ffmpeg(_ args: [String]) throws { try TestSupport.ffmpeg(args) }
}

/// Emits each picture's frames in reverse order at the end, and nothing while dripped: out of order, and
/// a different count when dripped (it drops what arrives after a tick); refuses its live option; emits
/// an event kind it does not declare, and declares one whose fields do not say what it writes.
final class BackwardsNode: Filter, Node, @unchecked Sendable {
    struct Held: NodeEvent {
        static let eventName = "held"
        static let summary = "how many pictures were held"
        static let fields: [EventField] = [.integer("pictures")]
        static let example = Held(count: 3)
        var count: Int
        var text: String { "held \(count)" }
    }
    struct Stray: NodeEvent {
        static let eventName = "stray"
        static let summary = "not declared"
        static let fields: [EventField] = []
        static let example = Stray()
        var text: String { "stray" }
    }
    static let events: [any NodeEvent.Type] = [Held.self]
    static let typeName = "backwards"
    static let summary = "a broken filter for the verifier's own test"
    static let inputs = [PadSpec("in", [.rawVideo], doc: "pictures")]
    static let outputs = [PadSpec("out", [.rawVideo], doc: "the same, reversed")]
    static let options = [OptionSpec("flip", .bool, default: "false", live: true, doc: "refused while running")]
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [n.inputs[0].format] }
    private var held: [Frame] = []
    private var ticked = false
    init(_ setup: NodeSetup) throws {}
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        if !ticked, let f = buffer.frame { held.append(f) }
    }
    override func tick(_ out: Outlet) throws { ticked = true }
    override func set(option: String, to value: OptionValue) throws { throw MediaError("cannot flip now") }
    override func finish(_ out: Outlet) throws {
        for f in held.reversed() { out.emit(f) }
        out.event(Stray())
    }
}

/// A private X server for the `screen` source, on a display number Xvfb picks itself.
final class XDisplay {
    let name: String
    private let server: Process

    init() throws {
        let path = ["/usr/bin/Xvfb", "/usr/local/bin/Xvfb"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path else { throw XCTSkip("Xvfb is not installed (scripts/setup installs it)") }
        server = Process()
        server.executableURL = URL(fileURLWithPath: path)
        server.arguments = ["-displayfd", "1", "-screen", "0", "640x480x24", "-nolisten", "tcp", "-noreset"]
        let out = Pipe()
        server.standardOutput = out
        server.standardError = FileHandle.nullDevice
        try server.run()
        var text = ""
        while !text.contains("\n") {
            let d = out.fileHandleForReading.availableData
            if d.isEmpty { break }
            text += String(decoding: d, as: UTF8.self)
        }
        guard let n = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { server.terminate(); throw MediaError("Xvfb did not start") }
        name = ":\(n)"
    }

    func stop() {
        server.terminate()
        server.waitUntilExit()
    }
}

/// Standard input replaced by a pipe whose writing end stays open and silent (what the `publisher`
/// source reads before serve relays anything), with the variable that says a relay is there;
/// `restore()` puts both back.
final class QuietStandardInput {
    private let saved: Int32
    private let writer: Int32
    private let variable = PublisherSourceNode.environment

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw MediaError("pipe: \(String(cString: strerror(errno)))") }
        saved = dup(STDIN_FILENO)
        dup2(fds[0], STDIN_FILENO)
        close(fds[0])
        writer = fds[1]
        setenv(variable, "stdin", 1)
    }

    func restore() {
        unsetenv(variable)
        dup2(saved, STDIN_FILENO)
        close(saved)
        close(writer)
    }
}
