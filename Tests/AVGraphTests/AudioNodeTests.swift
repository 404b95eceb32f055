import AVGraph
import AVGraphTesting
import AVGraphNodes
import CFFmpeg
import Foundation
import XCTest

/// Test-only sink: keeps every buffer it receives, per input, for assertions on real samples.
final class AudioCollectSink: Sink, Node, @unchecked Sendable {
    static let typeName = "collect"
    static let summary = "keeps what it receives (tests)"
    static let inputs = [PadSpec("in", Set(MediaKind.allCases), variadic: true)]
    static let options: [OptionSpec] = []
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }

    final class Store: @unchecked Sendable {
        let lock = NSLock()
        var buffers: [String: [[MediaBuffer]]] = [:]
        func append(_ b: MediaBuffer, node: String, input: Int) { lock.lock(); buffers[node]![input].append(b); lock.unlock() }
        func get(_ node: String, _ input: Int = 0) -> [MediaBuffer] { lock.lock(); defer { lock.unlock() }; return buffers[node]?[input] ?? [] }
    }
    static let store = Store()

    let name: String
    init(_ setup: NodeSetup) throws {
        name = setup.name
        Self.store.lock.lock()
        Self.store.buffers[name] = Array(repeating: [], count: setup.inputs.count)
        Self.store.lock.unlock()
    }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { Self.store.append(buffer, node: name, input: input) }
}

final class EventBox: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ s: String) { lock.lock(); lines.append(s); lock.unlock() }
    func events(_ name: String) -> [[String: Any]] {
        lock.lock(); defer { lock.unlock() }
        return lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.filter { $0["event"] as? String == name }
    }
}

final class AudioNodeTests: XCTestCase {
    // MARK: helpers

    static func registry() -> NodeRegistry {
        let r = TestSupport.freshRegistry()
        try! r.register(AudioCollectSink.self)
        return r
    }

    func check(_ yaml: String, dir: String) -> CheckedPipeline {
        let path = dir + "/test.pipe"
        try! yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return Checker(registry: Self.registry()).check(path: path)
    }

    @discardableResult
    func run(_ yaml: String, dir: String? = nil, realtime: Bool? = nil,
             before: (PipelineRun) -> Void = { _ in }, file: StaticString = #filePath, line: UInt = #line) throws -> EventBox {
        let checked = check(yaml, dir: dir ?? TestSupport.scratch())
        guard checked.isValid else {
            XCTFail("pipe does not check:\n" + checked.diagnostics.map(\.description).joined(separator: "\n"), file: file, line: line)
            throw MediaError("invalid pipe")
        }
        let box = EventBox()
        let log = EventLog(output: .none)
        log.addListener { box.add($0) }
        let run = try PipelineRun(checked, events: log, realtime: realtime)
        before(run)
        try run.run()
        return box
    }

    /// Unit tests run the node under test by hand in a `NodeHarness`, fed by real `tone` sources
    /// run by hand too (no pipeline, no threads), in media-time order; returns what it emitted.
    func harness(_ type: String, _ options: String, tones: [(name: String, options: String)]) throws -> [Frame] {
        let registry = TestSupport.registry
        let sources = try tones.map { try NodeHarness.frames(from: XCTUnwrap(registry["tone"]), options: $0.options) }
        let h = try NodeHarness(XCTUnwrap(registry[type]), options: options, inputs: sources.map(\.format), inputNames: tones.map(\.name))
        try h.feedByTime(sources.map(\.frames))
        return h.emittedFrames()
    }

    func frames(_ node: String) -> [Frame] { AudioCollectSink.store.get(node).compactMap(\.frame) }

    /// One channel of collected frames as floats (copies: test code only).
    func samples(_ frames: [Frame], channel: Int = 0) -> [Float] {
        var out: [Float] = []
        for f in frames {
            let planar = av_sample_fmt_is_planar(AVSampleFormat(rawValue: f.av.pointee.format)) != 0
            let p = f.av.pointee.extended_data[planar ? channel : 0]!
            let stride = planar ? 1 : f.channels, k0 = planar ? 0 : channel
            for i in 0..<f.sampleCount {
                let k = i * stride + k0
                switch av_get_packed_sample_fmt(AVSampleFormat(rawValue: f.av.pointee.format)) {
                case AV_SAMPLE_FMT_S16: out.append(Float(UnsafeRawPointer(p).assumingMemoryBound(to: Int16.self)[k]) / 32768)
                case AV_SAMPLE_FMT_S32: out.append(Float(Double(UnsafeRawPointer(p).assumingMemoryBound(to: Int32.self)[k]) / 2_147_483_648))
                case AV_SAMPLE_FMT_FLT: out.append(UnsafeRawPointer(p).assumingMemoryBound(to: Float.self)[k])
                default: XCTFail("unexpected sample format \(f.av.pointee.format)"); return out
                }
            }
        }
        return out
    }

    /// Checks that frames follow each other without holes; returns the first pts.
    @discardableResult
    func assertContinuous(_ frames: [Frame], file: StaticString = #filePath, line: UInt = #line) -> Int64 {
        guard let first = frames.first else { XCTFail("no frames", file: file, line: line); return 0 }
        var next = first.pts
        for f in frames {
            XCTAssertEqual(f.pts, next, "hole or overlap in the output timeline", file: file, line: line)
            next = f.pts + Int64(f.sampleCount)
        }
        return first.pts
    }

    func level(_ x: [Float], _ freq: Double, rate: Int, from: Double, to: Double) -> Double {
        TestSupport.toneLevel(x[Int(from * Double(rate))..<min(x.count, Int(to * Double(rate)))], freq: freq, rate: rate)
    }

    /// Phase of the `freq` component over a window, measured against absolute sample time.
    func phase(_ x: [Float], _ freq: Double, rate: Int, from: Double, length: Double = 0.1) -> Double {
        let n0 = Int(from * Double(rate)), n1 = n0 + Int(length * Double(rate))
        var re = 0.0, im = 0.0
        for n in n0..<n1 {
            let w = 2 * Double.pi * freq * Double(n) / Double(rate)
            re += Double(x[n]) * cos(w)
            im -= Double(x[n]) * sin(w)
        }
        return atan2(im, re)
    }

    func assertSamePhase(_ a: Double, _ b: Double, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        var d = abs(a - b).truncatingRemainder(dividingBy: 2 * .pi)
        d = min(d, 2 * .pi - d)
        XCTAssertLessThan(d, 0.05, "\(what): phase moved by \(d) rad", file: file, line: line)
    }

    // MARK: tone / rawaudio

    func testToneS16AndBigEndianGiveTheSameCleanTone() throws {
        try run("""
        nodes:
          le: {type: tone, freq: 1000, format: s16, duration: 0.5s}
          be: {type: tone, freq: 1000, format: s16be, duration: 0.5s}
          a: {type: collect, in: le}
          b: {type: collect, in: be}
        """)
        let a = frames("a"), b = frames("b")
        XCTAssertEqual(assertContinuous(a), 0)
        XCTAssertEqual(a.map(\.sampleCount).reduce(0, +), 24000, "stops exactly at duration")
        XCTAssertEqual(a.first?.av.pointee.format, AV_SAMPLE_FMT_S16.rawValue)
        XCTAssertEqual(b.first?.av.pointee.format, AV_SAMPLE_FMT_S16.rawValue, "big-endian arrives as native s16")
        let x = samples(a), y = samples(b)
        XCTAssertEqual(level(x, 1000, rate: 48000, from: 0, to: 0.5), 0.251, accuracy: 0.005)
        XCTAssertLessThan(level(x, 1500, rate: 48000, from: 0, to: 0.5), 0.002)
        XCTAssertEqual(level(y, 1000, rate: 48000, from: 0, to: 0.5), 0.251, accuracy: 0.005)
        XCTAssertLessThan(level(y, 1500, rate: 48000, from: 0, to: 0.5), 0.002, "byte-swapped wrongly would be noise")
        XCTAssertEqual(x, y)
    }

    func testToneStartsLateAndSkipsGapsKeepingPhase() throws {
        try run("""
        nodes:
          mic: {type: tone, freq: 500, rate: 8000, format: flt, start: 0.5s, gaps: [{at: 1s, for: 0.25s}], duration: 1.5s}
          c: {type: collect, in: mic}
        """)
        let f = frames("c")
        XCTAssertEqual(f.first?.pts, 4000)
        XCTAssertEqual(f.last.map { $0.pts + Int64($0.sampleCount) }, 12000)
        XCTAssertEqual(f.map(\.sampleCount).reduce(0, +), 4000 + 2000)
        XCTAssertFalse(f.contains { $0.pts < 10000 && $0.pts + Int64($0.sampleCount) > 8000 }, "nothing delivered in the gap")
        for frame in f {
            let x = samples([frame])
            for i in stride(from: 0, to: x.count, by: 97) {
                let expected = 0.2512 * sin(2 * Double.pi * 500 * Double(frame.pts + Int64(i)) / 8000)
                XCTAssertEqual(Double(x[i]), expected, accuracy: 1e-3)
            }
        }
    }

    func testRawaudioReadsBigEndianAndLoops() throws {
        let dir = TestSupport.scratch()
        let values: [Int16] = (0..<3000).map { Int16(truncatingIfNeeded: $0 * 7 - 9000) }
        var bytes = Data()
        for v in values { bytes.append(UInt8(UInt16(bitPattern: v) >> 8)); bytes.append(UInt8(UInt16(bitPattern: v) & 0xff)) }
        try bytes.write(to: URL(fileURLWithPath: dir + "/in.raw"))
        try run("""
        nodes:
          raw: {type: rawaudio, path: in.raw, format: s16be, rate: 8000, channels: 1, loop: 2}
          c: {type: collect, in: raw}
        """, dir: dir)
        let f = frames("c")
        assertContinuous(f)
        let x = samples(f)
        XCTAssertEqual(x.count, 6000)
        XCTAssertEqual(x.map { Int16($0 * 32768) }, values + values)
    }

    // MARK: mixer

    func testMixerAlignsLateMicWithoutShiftingApp() throws {
        let f = try harness("mixer", "rate: 48000, channels: 2", tones: [
            ("app", "freq: 440, rate: 44100, channels: 2, duration: 2s"), ("mic", "freq: 880, rate: 48000, start: 1s, duration: 2s")])
        XCTAssertEqual(assertContinuous(f), 0)
        XCTAssertTrue(f.dropLast().allSatisfy { $0.sampleCount == 1024 })
        XCTAssertEqual(Double(f.map(\.sampleCount).reduce(0, +)), 96000, accuracy: 64)
        for channel in 0..<2 {
            let x = samples(f, channel: channel)
            XCTAssertLessThan(level(x, 880, rate: 48000, from: 0.1, to: 0.95), 0.002, "mic absent before it starts")
            XCTAssertEqual(level(x, 880, rate: 48000, from: 1.05, to: 1.95), 0.251, accuracy: 0.01, "mic at full level in each channel")
            XCTAssertEqual(level(x, 440, rate: 48000, from: 0.1, to: 0.95), 0.251, accuracy: 0.01)
            XCTAssertEqual(level(x, 440, rate: 48000, from: 1.05, to: 1.95), 0.251, accuracy: 0.01)
            assertSamePhase(phase(x, 440, rate: 48000, from: 0.5), phase(x, 440, rate: 48000, from: 1.5), "app tone across the mic's join")
            // The mic's own phase follows absolute time too: it is placed at its timestamp, not at the output's start.
            assertSamePhase(phase(x, 880, rate: 48000, from: 1.2), phase(x, 880, rate: 48000, from: 1.7), "mic tone")
        }
    }

    func testMixerFillsGapsWithSilenceAndKeepsOtherInputInPlace() throws {
        let f = try harness("mixer", "", tones: [
            ("app", "freq: 440, gaps: [{at: 0.5s, for: 0.5s}], duration: 1.5s"), ("mic", "freq: 880, duration: 1.5s")])
        XCTAssertEqual(assertContinuous(f), 0)
        XCTAssertEqual(f.map(\.sampleCount).reduce(0, +), 72000)
        let x = samples(f)
        XCTAssertEqual(level(x, 440, rate: 48000, from: 0.05, to: 0.45), 0.251, accuracy: 0.01)
        XCTAssertLessThan(level(x, 440, rate: 48000, from: 0.55, to: 0.95), 0.002, "silence while the app plays nothing")
        XCTAssertEqual(level(x, 440, rate: 48000, from: 1.05, to: 1.45), 0.251, accuracy: 0.01)
        XCTAssertEqual(level(x, 880, rate: 48000, from: 0.55, to: 0.95), 0.251, accuracy: 0.01)
        assertSamePhase(phase(x, 440, rate: 48000, from: 0.2), phase(x, 440, rate: 48000, from: 1.2), "app after its gap")
        assertSamePhase(phase(x, 880, rate: 48000, from: 0.2), phase(x, 880, rate: 48000, from: 1.2), "mic across the app's gap")
    }

    func testMixerGainAndMute() throws {
        let x = samples(try harness("mixer", "gain: {a: -6dB}, mute: {b: true}", tones: [
            ("a", "freq: 440, duration: 0.5s"), ("b", "freq: 880, duration: 0.5s")]))
        XCTAssertEqual(level(x, 440, rate: 48000, from: 0, to: 0.5), 0.251 * 0.501, accuracy: 0.004)
        XCTAssertLessThan(level(x, 880, rate: 48000, from: 0, to: 0.5), 0.001)
    }

    func testMixerLiveChangesAreValidatedAndReported() throws {
        final class Errors: @unchecked Sendable { var list: [String] = []; let lock = NSLock() }
        let errors = Errors()
        let events = try run("""
        duration: 0.5s
        nodes:
          app: {type: tone, freq: 440}
          mic: {type: tone, freq: 880}
          mix: {type: mixer, in: [app, mic], mute: {mic: true}}
          c: {type: collect, in: mix}
        """, before: { run in
            run.set(node: "mix", option: "gain", value: .perInput(["mc": .number(2)])) { e in
                errors.lock.lock(); errors.list.append(e.map { "\($0)" } ?? "ok"); errors.lock.unlock()
            }
            run.set(node: "mix", option: "mute", value: .perInput(["mic": .bool(false)])) { e in
                errors.lock.lock(); errors.list.append(e.map { "\($0)" } ?? "ok"); errors.lock.unlock()
            }
        })
        XCTAssertEqual(errors.list.count, 2)
        XCTAssertTrue(errors.list[0].contains("did you mean 'mic'"), errors.list[0])
        XCTAssertEqual(errors.list[1], "ok")
        let applied = events.events("applied")
        XCTAssertEqual(applied.count, 1)
        XCTAssertEqual(applied.first?["option"] as? String, "mute")
        XCTAssertEqual(applied.first?["media_time"] as? Double, 0)
        let x = samples(frames("c"))
        XCTAssertEqual(level(x, 880, rate: 48000, from: 0.05, to: 0.5), 0.251, accuracy: 0.01, "unmuted live")
    }

    /// The runtime owns live changes: it refuses an option that is not live or a value out of its
    /// declared range before the node sees it, reports `applied` with the value in its own type,
    /// and a partial per-input change keeps the other inputs' values (`ctl get` shows the whole map).
    func testTheRuntimeChecksAndAnnouncesLiveChanges() throws {
        final class Results: @unchecked Sendable { var list: [String] = []; let lock = NSLock() }
        let results = Results()
        let events = try run("""
        duration: 0.5s
        nodes:
          app: {type: tone, freq: 440}
          mic: {type: tone, freq: 880}
          mix: {type: mixer, in: [app, mic], gain: {app: 0.5, mic: 2}}
          c: {type: collect, in: mix}
        """, before: { run in
            @Sendable func record(_ e: Error?) { results.lock.lock(); results.list.append(e.map { "\($0)" } ?? "ok"); results.lock.unlock() }
            run.set(node: "mix", option: "rate", value: .int(44100)) { record($0) }
            run.set(node: "app", option: "freq", value: .number(1000)) { record($0) }
            run.set(node: "mix", option: "gain", value: .perInput(["mic": .number(1)])) { record($0) }
        })
        XCTAssertEqual(results.list.count, 3, "\(results.list)")
        XCTAssertTrue(results.list[0].contains("not live"), results.list[0])
        XCTAssertTrue(results.list[1].contains("not live"), results.list[1])
        XCTAssertEqual(results.list[2], "ok")
        let applied = events.events("applied")
        XCTAssertEqual(applied.count, 1, "\(applied)")
        XCTAssertEqual(applied.first?["node"] as? String, "mix")
        XCTAssertEqual(applied.first?["value"] as? [String: Double], ["mic": 1.0], "the value in its own type, not text")
    }

    func testAPartialPerInputChangeKeepsTheOtherInputs() throws {
        let checked = check("""
        nodes:
          app: {type: tone, freq: 440, duration: 0.3s}
          mic: {type: tone, freq: 880, duration: 0.3s}
          mix: {type: mixer, in: [app, mic], gain: {app: 0.5, mic: 2}}
          c: {type: collect, in: mix}
        """, dir: TestSupport.scratch())
        let run = try PipelineRun(checked, events: EventLog(output: .none))
        let done = DispatchSemaphore(value: 0)
        run.set(node: "mix", option: "gain", value: .perInput(["mic": .number(1)])) { _ in done.signal() }
        try run.run()
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(run.currentOption(node: "mix", option: "gain"), .perInput(["app": .number(0.5), "mic": .number(1)]))
    }

    func testMixerRejectsUnknownInputNames() {
        let checked = check("""
        nodes:
          app: {type: tone}
          mic: {type: tone}
          mix: {type: mixer, in: [app, mic], gain: {mc: 2}}
          c: {type: collect, in: mix}
        """, dir: TestSupport.scratch())
        XCTAssertFalse(checked.isValid)
        let text = checked.diagnostics.map(\.description).joined(separator: "\n")
        XCTAssertTrue(text.contains("gain") && text.contains("did you mean 'mic'"), text)
    }

    func testMixerNeverClips() throws {
        let x = samples(try harness("mixer", "channels: 1", tones: [
            ("a", "freq: 440, level: 0dB, format: fltp, duration: 0.3s"), ("b", "freq: 440, level: 0dB, format: fltp, duration: 0.3s")]))
        XCTAssertGreaterThan(x.map(abs).max() ?? 0, 0.78, "held at the limiter's ceiling (-2 dBTP), not below")
        XCTAssertLessThan(x.map(abs).max() ?? 2, 0.795)
    }

    func testMixerRealtimeStaysContinuous() throws {
        try run("""
        duration: 0.6s
        nodes:
          app: {type: tone, freq: 440}
          mic: {type: tone, freq: 880, start: 0.3s}
          mix: {type: mixer, in: [app, mic]}
          c: {type: collect, in: mix}
        """, realtime: true)
        let f = frames("c")
        XCTAssertEqual(assertContinuous(f), 0)
        XCTAssertEqual(Double(f.map(\.sampleCount).reduce(0, +)), 28800, accuracy: 1024)
    }

    // MARK: meter / resample

    func testMeterReportsLevelsAndPassesFramesThrough() throws {
        let events = try run("""
        nodes:
          t: {type: tone, freq: 1000, level: -12dB, duration: 1s}
          m: {type: meter, in: t}
          c: {type: collect, in: m}
        """)
        XCTAssertEqual(frames("c").map(\.sampleCount).reduce(0, +), 48000)
        let levels = events.events("level")
        XCTAssertEqual(levels.count, 10)
        for e in levels {
            let rms = e["rms"] as? [Double] ?? [], peak = e["peak"] as? [Double] ?? []
            XCTAssertEqual(rms.first ?? 0, -15.05, accuracy: 0.2)
            XCTAssertEqual(peak.first ?? 0, -12.0, accuracy: 0.2)
        }
        XCTAssertEqual(levels.last?["media_time"] as? Double ?? 0, 1.0, accuracy: 1e-6)
    }

    func testResampleKeepsDurationAndTone() throws {
        try run("""
        nodes:
          t: {type: tone, freq: 1000, duration: 1s}
          r: {type: resample, in: t, rate: 44100, channels: 2, format: s16}
          c: {type: collect, in: r}
        """)
        let f = frames("c")
        XCTAssertEqual(assertContinuous(f), 0)
        XCTAssertEqual(f.first?.channels, 2)
        XCTAssertEqual(f.first?.sampleRate, 44100)
        XCTAssertEqual(Double(f.map(\.sampleCount).reduce(0, +)), 44100, accuracy: 2)
        let x = samples(f, channel: 1)
        XCTAssertEqual(level(x, 1000, rate: 44100, from: 0.05, to: 0.95), 0.251, accuracy: 0.005)
    }

    // MARK: aac

    func testAacEncodesToneAtLevelAndDuration() throws {
        try run("""
        nodes:
          t: {type: tone, freq: 1000, rate: 44100, channels: 2, duration: 2s}
          enc: {type: aac, in: t, bitrate: 128k}
          c: {type: collect, in: enc}
        """)
        let packets = AudioCollectSink.store.get("c").compactMap(\.packet)
        XCTAssertGreaterThan(packets.count, 80)
        let stream = try XCTUnwrap(packets.first?.stream)
        XCTAssertEqual(stream.parameters.pointee.codec_id, AV_CODEC_ID_AAC)
        XCTAssertGreaterThan(stream.parameters.pointee.extradata_size, 0, "MP4 needs the AudioSpecificConfig")
        XCTAssertTrue(packets.allSatisfy { $0.stream === stream }, "one shared stream description")

        let path = TestSupport.scratch() + "/tone.m4a"
        try mux(packets, to: path)
        let x = try TestSupport.decodeAudio(path, rate: 44100, channel: 0)
        XCTAssertEqual(Double(x.count) / 44100, 2.0, accuracy: 0.05)
        XCTAssertEqual(level(x, 1000, rate: 44100, from: 0.2, to: 1.8), 0.251, accuracy: 0.015)
    }

    /// Writes packets to an MP4-family file with libavformat, as a sink would.
    func mux(_ packets: [Packet], to path: String) throws {
        var oc: UnsafeMutablePointer<AVFormatContext>?
        try AVFailure.check(avformat_alloc_output_context2(&oc, nil, nil, path), "avformat_alloc_output_context2")
        defer { avformat_free_context(oc) }
        let st = avformat_new_stream(oc, nil)!
        avcodec_parameters_copy(st.pointee.codecpar, packets[0].stream.parameters)
        st.pointee.time_base = packets[0].timeBase.av
        try AVFailure.check(avio_open(&oc!.pointee.pb, path, avg_avio_write()), "avio_open")
        try AVFailure.check(avformat_write_header(oc, nil), "avformat_write_header")
        for p in packets {
            let pkt = av_packet_clone(p.av)
            av_packet_rescale_ts(pkt, p.timeBase.av, st.pointee.time_base)
            pkt!.pointee.stream_index = 0
            try AVFailure.check(av_interleaved_write_frame(oc, pkt), "av_interleaved_write_frame")
            var q = pkt
            av_packet_free(&q)
        }
        try AVFailure.check(av_write_trailer(oc), "av_write_trailer")
        avio_closep(&oc!.pointee.pb)
    }
}
