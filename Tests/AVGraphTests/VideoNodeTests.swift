import AVGraph
import AVGraphTesting
import AVGraphNodes
import CFFmpeg
import Foundation
import XCTest

/// Frames kept by `collect` sinks, by the sink's `key`.
final class CollectedFrames: @unchecked Sendable {
    static let shared = CollectedFrames()
    private let lock = NSLock()
    private var frames: [String: [Frame]] = [:]
    private var formats: [String: StreamFormat] = [:]

    func reset() { lock.lock(); frames = [:]; formats = [:]; lock.unlock() }
    func append(_ key: String, _ f: Frame) { lock.lock(); frames[key, default: []].append(f); lock.unlock() }
    func setFormat(_ key: String, _ f: StreamFormat) { lock.lock(); formats[key] = f; lock.unlock() }
    func frames(_ key: String) -> [Frame] { lock.lock(); defer { lock.unlock() }; return frames[key] ?? [] }
    func format(_ key: String) -> StreamFormat? { lock.lock(); defer { lock.unlock() }; return formats[key] }
}

/// A test-only sink that keeps every frame it gets, so tests can look at real pixels.
final class CollectSink: Sink, Node, @unchecked Sendable {
    static let typeName = "collect"
    static let summary = "keeps raw frames for tests"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let options = [OptionSpec("key", .string, required: true, doc: "name the frames are kept under")]
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }

    let key: String
    init(_ setup: NodeSetup) throws {
        key = setup.options.string("key")!
        if let f = setup.inputs.first?.format { CollectedFrames.shared.setFormat(key, f) }
    }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        if let f = buffer.frame { CollectedFrames.shared.append(key, f) }
    }
}

/// `collect` that also declares, as a privacy card's schedule does, that it replaces its input
/// unseen during `hides`: what its producers then send there is what the test looks at.
final class HidingCollectSink: Sink, Node, @unchecked Sendable {
    static let typeName = "collect-hiding"
    static let summary = "keeps raw frames for tests; declares spans it hides"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let hides = Setting.spans("hides", doc: "spans declared hidden")
    static let options = [OptionSpec("key", .string, required: true, doc: "name the frames are kept under"), hides.spec]
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
    static func hiddenSpans(input: Int, options: OptionValues) -> [TimeSpan] { options[Self.hides] }

    let key: String
    init(_ setup: NodeSetup) throws { key = setup.options.string("key")! }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        if let f = buffer.frame { CollectedFrames.shared.append(key, f) }
    }
}

final class CollectedEvents: @unchecked Sendable {
    private let lock = NSLock()
    private var kept: [String] = []
    func add(_ line: String) { lock.lock(); kept.append(line); lock.unlock() }
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return kept }
}

final class VideoNodeTests: XCTestCase {
    static let registry: NodeRegistry = {
        let r = TestSupport.freshRegistry()
        try! r.register(CollectSink.self)
        try! r.register(HidingCollectSink.self)
        return r
    }()

    /// Checks and runs `yaml` (offline) and returns the checked pipeline; frames land in `CollectedFrames`.
    @discardableResult
    func run(_ yaml: String, in dir: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> CheckedPipeline {
        CollectedFrames.shared.reset()
        let dir = dir ?? TestSupport.scratch(name)
        let path = dir + "/test.pipe"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let checked = Checker(registry: Self.registry).check(path: path)
        guard checked.isValid else {
            XCTFail("pipe does not check:\n" + checked.diagnostics.map(\.description).joined(separator: "\n"), file: file, line: line)
            throw MediaError("invalid pipe")
        }
        try PipelineRun(checked, events: EventLog(output: .none), realtime: false).run()
        return checked
    }

    func frames(_ key: String) -> [Frame] { CollectedFrames.shared.frames(key) }

    /// Unit tests run the node under test by hand in a `NodeHarness`, fed by a real source run by
    /// hand too (no pipeline, no threads): `testsrc` frames through `type`, what it emitted back.
    func harness(_ type: String, _ options: String, after source: String, realtime: Bool = false) throws -> (source: [Frame], harness: NodeHarness) {
        let src = try NodeHarness.frames(from: XCTUnwrap(Self.registry["testsrc"]), options: source)
        let h = try NodeHarness(XCTUnwrap(Self.registry[type]), options: options, inputs: [src.format], realtime: realtime)
        try h.feedByTime([src.frames])
        return (src.frames, h)
    }

    /// Mean luma of a rectangle of a frame's first plane.
    func luma(_ f: Frame, _ x: Int, _ y: Int, _ w: Int, _ h: Int) -> Double {
        let p = f.plane(0)!, ls = f.lineSize(0)
        var sum = 0
        for row in y..<(y + h) { for col in x..<(x + w) { sum += Int(p[row * ls + col]) } }
        return Double(sum) / Double(w * h)
    }

    /// Mean luma of the four corner blocks (side `side`, 2 px inset): TL, TR, BL, BR.
    func corners(_ f: Frame, side: Int) -> [Double] {
        let s = side - 4, w = f.width, h = f.height
        return [luma(f, 2, 2, s, s), luma(f, w - side + 2, 2, s, s), luma(f, 2, h - side + 2, s, s), luma(f, w - side + 2, h - side + 2, s, s)]
    }

    func assertMarkerTopLeft(_ f: Frame, side: Int, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let c = corners(f, side: side)
        XCTAssertGreaterThan(c[0], 200, "\(what): top-left corner should be bright, corners \(c)", file: file, line: line)
        for i in 1..<4 { XCTAssertLessThan(c[i], 61, "\(what): corner \(i) should be dark, corners \(c)", file: file, line: line) }
    }

    // MARK: testsrc + orient

    func testUprightSourcePassesThroughWithMarkerTopLeft() throws {
        let (raw, h) = try harness("orient", "", after: "size: 120x260, rate: 10, duration: 0.5s")
        let out = h.emittedFrames()
        XCTAssertEqual(out.count, 5)
        XCTAssertEqual(out.map(\.pts), [0, 1, 2, 3, 4])
        for (r, o) in zip(raw, out) {
            XCTAssertEqual(o.width, 120)
            XCTAssertEqual(o.height, 260)
            XCTAssertEqual(o.orientation, .up)
            // `up` passes the picture itself, no copy.
            XCTAssertEqual(r.plane(0), o.plane(0))
            assertMarkerTopLeft(o, side: 24, "frame \(o.pts)")
        }
        XCTAssertEqual(out[0].av.pointee.color_range, AVCOL_RANGE_MPEG)
        XCTAssertEqual(out[0].av.pointee.colorspace, AVCOL_SPC_BT709)
        XCTAssertEqual(h.outputFormats.first?.sizeVaries, true)
    }

    func testLeftTaggedBufferIsTurnedClockwise() throws {
        let (raw, h) = try harness("orient", "", after: "size: 120x260, rate: 10, duration: 0.3s, orientation: left")
        let out = h.emittedFrames()
        XCTAssertEqual(out.count, 3)
        for (r, o) in zip(raw, out) {
            XCTAssertEqual(r.orientation, .left)
            XCTAssertEqual([r.width, r.height], [120, 260])
            // `left` (EXIF 8): the stored top row is the upright left column, so the upright
            // top-left corner is stored at the buffer's top-right.
            let c = corners(r, side: 24)
            XCTAssertGreaterThan(c[1], 200, "stored corners \(c)")
            XCTAssertEqual([o.width, o.height], [260, 120])
            XCTAssertEqual(o.orientation, .up)
            XCTAssertEqual(o.pts, r.pts)
            assertMarkerTopLeft(o, side: 24, "frame \(o.pts)")
        }
    }

    func testMirroredTagsAndScheduleComeOutUpright() throws {
        let out = try harness("orient", "", after: """
            size: 120x260, rate: 10, duration: 2s, format: yuv420p,
            orientation: [{at: 0s, value: left-mirrored}, {at: 0.5s, value: down}, {at: 1s, value: up-mirrored}, {at: 1.5s, value: right}]
            """).harness.emittedFrames()
        XCTAssertEqual(out.count, 20)
        for o in out {
            let turned = (0..<5).contains(o.pts) || (15..<20).contains(o.pts)
            XCTAssertEqual([o.width, o.height], turned ? [260, 120] : [120, 260], "frame \(o.pts)")
            assertMarkerTopLeft(o, side: 24, "frame \(o.pts)")
        }
    }

    /// The block kernels of `orient` against the mapping's own definition, pixel by pixel, for
    /// every tag, with sizes that leave partial blocks at the edges.
    func testTurningMatchesTheOrientationMappingForEveryTag() throws {
        for format in ["nv12", "yuv420p", "gray"] { for (bw, bh) in [(38, 54), (150, 86), (58, 90), (134, 266)] {
            let layout = PixelLayout(format)!
            let pool = try VideoFramePool(width: bw, height: bh, pixelFormat: format)
            let source = try pool.frame(timeBase: Rational(1, 30))
            var seed: UInt32 = 7
            for p in layout.planes.indices {
                let rows = layout.planeHeight(p, bh), bytes = layout.planeWidth(p, bw) * layout.planes[p].bytesPerElement
                for y in 0..<rows { for x in 0..<bytes {
                    seed = seed &* 1_103_515_245 &+ 12345
                    source.plane(p)![y * source.lineSize(p) + x] = UInt8(truncatingIfNeeded: seed >> 16)
                } }
            }
            for tag in Orientation.allCases { for bands in [1, 2, 3] {
                let size = tag.uprightSize(width: bw, height: bh)
                let target = try VideoFramePool(width: size.width, height: size.height, pixelFormat: format).frame(timeBase: Rational(1, 30))
                PictureTurn.upright(source, into: target, map: tag.storage, layout: layout, bands: bands)
                for p in layout.planes.indices {
                    let e = layout.planes[p].bytesPerElement
                    let pw = layout.planeWidth(p, bw), ph = layout.planeHeight(p, bh)
                    for y in 0..<layout.planeHeight(p, size.height) { for x in 0..<layout.planeWidth(p, size.width) {
                        let b = tag.storage.bufferPoint(x: x, y: y, bufferWidth: pw, bufferHeight: ph)
                        for k in 0..<e {
                            let want = source.plane(p)![b.y * source.lineSize(p) + b.x * e + k]
                            let got = target.plane(p)![y * target.lineSize(p) + x * e + k]
                            if want != got { XCTFail("\(format) \(bw)x\(bh) \(tag) \(bands) bands plane \(p) at \(x),\(y)"); return }
                        }
                    } }
                }
            } }
        } }
    }

    // MARK: resize

    func testThreadedScalerMatchesOneThreadIntoACanvasRect() throws {
        // A phone-screen-sized NV12 picture of noise, scaled into the middle of a 720p canvas.
        let (sw, sh) = (1170, 2532)
        let source = try VideoFramePool(width: sw, height: sh, pixelFormat: AV_PIX_FMT_NV12).frame(timeBase: Rational(1, 30))
        var seed: UInt32 = 11
        for p in 0..<2 { for y in 0..<(p == 0 ? sh : sh / 2) { for x in 0..<sw {
            seed = seed &* 1_103_515_245 &+ 12345
            source.plane(p)![y * source.lineSize(p) + x] = UInt8(truncatingIfNeeded: seed >> 16)
        } } }
        let sourceRect = PixelRect(x: 0, y: 0, width: sw, height: sh)
        let targetRect = PixelRect(x: 474, y: 0, width: 332, height: 720)
        var outputs: [[UInt8]] = []
        for threads in [1, 2, 3] {
            let scaler = try Scaler(from: sw, sh, AV_PIX_FMT_NV12, to: 332, 720, AV_PIX_FMT_YUV420P, threads: threads)
            XCTAssertEqual(scaler.threads, threads)
            let target = try VideoFramePool(width: 1280, height: 720, pixelFormat: AV_PIX_FMT_YUV420P).frame(timeBase: Rational(1, 30))
            for p in 0..<3 { memset(target.plane(p)!, 7, target.lineSize(p) * (p == 0 ? 720 : 360)) }
            try scaler.scale(source, sourceRect, into: target, targetRect)
            var bytes: [UInt8] = []
            for p in 0..<3 {
                let (w, h) = p == 0 ? (1280, 720) : (640, 360)
                for y in 0..<h { bytes += UnsafeBufferPointer(start: target.plane(p)! + y * target.lineSize(p), count: w) }
            }
            outputs.append(bytes)
        }
        XCTAssertTrue(outputs[0] == outputs[1], "two slice threads give the picture one thread gives")
        XCTAssertTrue(outputs[0] == outputs[2], "three slice threads give the picture one thread gives")
        // Outside the rect nothing was written.
        XCTAssertEqual(outputs[0][0], 7)
        XCTAssertEqual(outputs[0][1279], 7)
    }


    func testResizeFitsPortraitScreenIntoLandscapeWithBlackBars() throws {
        let (_, h) = try harness("resize", "size: 1280x720, mode: fit", after: "duration: 0.1s")
        let out = h.emittedFrames()
        XCTAssertEqual(out.count, 3)
        XCTAssertEqual(h.outputFormats.first?.sizeVaries, false)
        // 1170x2532 scaled to height 720 is 332 wide (even), centred at x = 474.
        for f in out {
            XCTAssertEqual([f.width, f.height], [1280, 720])
            XCTAssertEqual(f.pixelFormat, AV_PIX_FMT_YUV420P)
            XCTAssertEqual(f.av.pointee.color_range, AVCOL_RANGE_MPEG)
            XCTAssertEqual(luma(f, 0, 0, 474, 720), 16, "left bar is black")
            XCTAssertEqual(luma(f, 806, 0, 474, 720), 16, "right bar is black")
            XCTAssertEqual(f.plane(1)![100], 128, "bar chroma is neutral")
            // The marker (234 px of 1170, so ~66 px here) sits in the content's top-left corner.
            XCTAssertGreaterThan(luma(f, 478, 4, 56, 56), 200)
            XCTAssertLessThan(luma(f, 806 - 60, 4, 56, 56), 61)
            XCTAssertLessThan(luma(f, 478, 720 - 60, 56, 56), 61)
            XCTAssertGreaterThan(luma(f, 474, 200, 332, 320), 40, "content fills the middle")
        }
        XCTAssertEqual(out.map(\.pts), [0, 1, 2])
    }

    func testResizeFillCropsAndStretchIgnoresAspect() throws {
        let source = "size: 200x400, rate: 10, duration: 0.2s, format: yuv420p"
        let fill = try harness("resize", "size: 200x200, mode: fill, format: nv12", after: source).harness.emittedFrames()
        let stretch = try harness("resize", "size: 100x100, mode: stretch, quality: fast", after: source).harness.emittedFrames()
        XCTAssertEqual(fill.count, 2)
        XCTAssertEqual(stretch.count, 2)
        // fill keeps the middle 200x200 of 200x400: the top corners (and the marker) are cropped away.
        XCTAssertEqual([fill[0].width, fill[0].height], [200, 200])
        XCTAssertEqual(fill[0].pixelFormat, AV_PIX_FMT_NV12)
        XCTAssertLessThan(luma(fill[0], 0, 0, 30, 30), 150)
        // stretch squeezes the whole picture: the 40 px marker is 20x10 now.
        XCTAssertEqual([stretch[0].width, stretch[0].height], [100, 100])
        XCTAssertGreaterThan(luma(stretch[0], 2, 1, 14, 7), 200)
        XCTAssertLessThan(luma(stretch[0], 84, 90, 14, 7), 61)
    }

    // MARK: privacy

    func testPrivacyScheduleSwapsInTheFittedCard() throws {
        let dir = TestSupport.scratch(name)
        try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=320x120", "-frames:v", "1", dir + "/card.png"])
        let out = try harness("privacy", "image: \(dir)/card.png, schedule: [{at: 1s, for: 1s}]",
                              after: "size: 160x120, rate: 10, duration: 3s").harness.emittedFrames()
        XCTAssertEqual(out.count, 30)
        XCTAssertEqual(out.map(\.pts), Array(0..<30))
        // The 320x120 card fitted into 160x120: red (BT.709 limited luma 63) in a 160x60 band, black bars above and below.
        var expected = [UInt8](repeating: 16, count: 160 * 120)
        for y in 30..<90 { for x in 0..<160 { expected[y * 160 + x] = 63 } }
        func difference(_ f: Frame) -> Double {
            let p = f.plane(0)!, ls = f.lineSize(0)
            var sum = 0
            for y in 0..<120 { for x in 0..<160 { sum += abs(Int(p[y * ls + x]) - Int(expected[y * 160 + x])) } }
            return Double(sum) / Double(160 * 120)
        }
        for f in out {
            let d = difference(f)
            if (10..<20).contains(f.pts) {
                XCTAssertLessThan(d, 2, "frame \(f.pts) should be the card")
                XCTAssertEqual(f.plane(0), out[10].plane(0), "the card is one picture, shared")
            } else {
                XCTAssertGreaterThan(d, 20, "frame \(f.pts) should be the screen")
            }
        }
    }

    /// Pictures that every consumer replaces unseen (a privacy schedule) are neither turned nor
    /// scaled: `orient` and `resize` send a picture of the right size and timing in the
    /// background color instead. One consumer that looks is enough to have them drawn.
    func testPicturesEveryConsumerHidesAreNotDrawn() throws {
        let source = "src: {type: testsrc, size: 64x128, rate: 10, duration: 3s, format: yuv420p, orientation: right}"
        try run("""
        nodes:
          \(source)
          turned: {type: orient, in: src, override: right}
          hidden-turn: {type: collect-hiding, in: turned, key: turn, hides: [{at: 1s, for: 1s}]}
          fit: {type: resize, in: src, size: 160x120, background: white}
          hidden-fit: {type: collect-hiding, in: fit, key: fit, hides: [{at: 1s, for: 1s}]}
        """)
        let turn = frames("turn"), fit = frames("fit")
        XCTAssertEqual(turn.map(\.pts), Array(0..<30))
        XCTAssertEqual(fit.map(\.pts), Array(0..<30))
        for f in turn {
            XCTAssertEqual(f.width, 128); XCTAssertEqual(f.height, 64)
            if (10..<20).contains(f.pts) {
                XCTAssertEqual(luma(f, 0, 0, 128, 64), 16, "frame \(f.pts): not turned, black")
            } else {
                XCTAssertGreaterThan(luma(f, 0, 0, 128, 64), 20, "frame \(f.pts): the turned picture")
            }
        }
        for f in fit {
            XCTAssertEqual(f.width, 160); XCTAssertEqual(f.height, 120)
            // The turned 128x64 picture fits as 160x80 between white bars (rows 20..<100).
            let middle = luma(f, 0, 20, 160, 80)
            if (10..<20).contains(f.pts) {
                XCTAssertEqual(middle, 235, "frame \(f.pts): not scaled, all background")
            } else {
                XCTAssertLessThan(middle, 230, "frame \(f.pts): the scaled picture")
            }
        }

        // A second consumer of `fit` that looks at every picture: nothing is skipped for either.
        try run("""
        nodes:
          \(source)
          fit: {type: resize, in: src, size: 160x120, background: white}
          hidden-fit: {type: collect-hiding, in: fit, key: fit, hides: [{at: 1s, for: 1s}]}
          looking: {type: collect, in: fit, key: seen}
        """)
        let seen = frames("seen")
        XCTAssertEqual(seen.count, 30)
        for f in seen { XCTAssertLessThan(luma(f, 0, 20, 160, 80), 230, "frame \(f.pts) was drawn") }
    }

    /// Through a real privacy schedule: the output is the card in the span and the resized
    /// picture elsewhere, exactly as when every picture was drawn.
    func testScheduledCardOverSkippedPicturesLooksTheSame() throws {
        let dir = TestSupport.scratch(name)
        try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=320x120", "-frames:v", "1", dir + "/card.png"])
        func output(_ schedule: String, extraConsumer: Bool) throws -> [Frame] {
            try run("""
            nodes:
              src: {type: testsrc, size: 64x128, rate: 10, duration: 3s, format: yuv420p, orientation: right}
              fit: {type: resize, in: src, size: 160x120}
              hide: {type: privacy, in: fit, image: card.png, schedule: \(schedule)}
              out: {type: collect, in: hide, key: out}
            """ + (extraConsumer ? "\n  tap: {type: collect, in: fit, key: tap}\n" : "\n"), in: dir)
            return frames("out")
        }
        let skipped = try output("[{at: 1s, for: 1s}]", extraConsumer: false)
        let drawn = try output("[{at: 1s, for: 1s}]", extraConsumer: true)
        XCTAssertEqual(skipped.count, 30)
        XCTAssertEqual(skipped.map(\.pts), drawn.map(\.pts))
        for (a, b) in zip(skipped, drawn) {
            XCTAssertEqual(luma(a, 0, 0, 160, 120), luma(b, 0, 0, 160, 120), "frame \(a.pts)")
            if (10..<20).contains(a.pts) { XCTAssertEqual(luma(a, 0, 30, 160, 60), 63, accuracy: 1, "frame \(a.pts) is the card") }
        }
    }

    func testPrivacyLiveSwitchAppliesOnTheNextFrame() throws {
        let dir = TestSupport.scratch(name)
        try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=white:s=64x64", "-frames:v", "1", dir + "/card.png"])
        try """
        nodes:
          src: {type: testsrc, size: 64x64, rate: 10, duration: 0.5s, format: yuv420p}
          hide: {type: privacy, in: src, image: card.png}
          out: {type: collect, in: hide, key: out}
        """.write(toFile: dir + "/test.pipe", atomically: true, encoding: .utf8)
        CollectedFrames.shared.reset()
        let checked = Checker(registry: Self.registry).check(path: dir + "/test.pipe")
        XCTAssertTrue(checked.isValid)
        let events = EventLog(output: .none)
        let applied = CollectedEvents()
        events.addListener { line in if line.contains("\"applied\"") { applied.add(line) } }
        let run = try PipelineRun(checked, events: events, realtime: false)
        let accepted = expectation(description: "set accepted")
        run.set(node: "hide", option: "enabled", value: .bool(true)) { error in XCTAssertNil(error); accepted.fulfill() }
        try run.run()
        wait(for: [accepted], timeout: 1)
        let out = frames("out")
        XCTAssertEqual(out.count, 5)
        for f in out { XCTAssertEqual(luma(f, 0, 0, 64, 64), 235, accuracy: 1, "frame \(f.pts) is the white card") }
        XCTAssertEqual(applied.lines.count, 1)
        XCTAssertTrue(applied.lines.first?.contains("\"media_time\":0") ?? false, applied.lines.joined())
    }

    // MARK: fps

    func fpsThroughStall(hold: String) throws -> [Frame] {
        let (raw, h) = try harness("fps", "rate: 30, hold: \(hold)", after: "size: 64x64, rate: 30, duration: 3s, stalls: [{at: 1s, for: 1s}]")
        XCTAssertEqual(raw.count, 60, "the source leaves out the stalled second")
        return h.emittedFrames()
    }

    func testFpsRepeatsLastFrameThroughStallWithinHold() throws {
        let out = try fpsThroughStall(hold: "2s")
        XCTAssertEqual(out.map(\.pts), Array(0..<90))
        XCTAssertEqual(out[40].timeBase, Rational(1, 30))
        // The repeats are the last frame before the stall, by reference.
        for f in out[30..<60] { XCTAssertEqual(f.plane(0), out[29].plane(0)) }
        XCTAssertNotEqual(out[60].plane(0), out[29].plane(0))
    }

    func testFpsWithoutHoldLeavesAGap() throws {
        let out = try fpsThroughStall(hold: "0s")
        XCTAssertEqual(out.map(\.pts), Array(0..<30) + Array(60..<90))
    }

    func testFpsKeepsARealtimeStreamGoingThroughAStall() throws {
        let dir = TestSupport.scratch(name)
        try """
        realtime: true
        nodes:
          src: {type: testsrc, size: 64x64, rate: 30, duration: 1.5s, stalls: [{at: 0.5s, for: 0.5s}]}
          cfr: {type: fps, in: src, rate: 30}
          out: {type: collect, in: cfr, key: out}
        """.write(toFile: dir + "/test.pipe", atomically: true, encoding: .utf8)
        CollectedFrames.shared.reset()
        let checked = Checker(registry: Self.registry).check(path: dir + "/test.pipe")
        try PipelineRun(checked, events: EventLog(output: .none), realtime: true).run()
        let pts = frames("out").map(\.pts)
        // The stall is bridged by repeats sent on the clock; however late they go out, no slot is skipped.
        XCTAssertEqual(pts, Array(0..<Int64(pts.count)))
        // A picture that reaches `fps` after its slot was already repeated goes out one slot later (load).
        XCTAssertTrue((45...50).contains(pts.count), "\(pts.count) frames")
    }

    func testFpsHalvesSixtyToThirty() throws {
        let (raw, h) = try harness("fps", "rate: 30", after: "size: 64x64, rate: 60, duration: 2s")
        let out = h.emittedFrames()
        XCTAssertEqual(raw.count, 120)
        XCTAssertEqual(out.map(\.pts), Array(0..<60))
        XCTAssertEqual(out[0].timeBase, Rational(1, 30))
        // Each slot shows an input picture due by then (no copies), every other one.
        let inputs = raw.map { $0.plane(0) }
        for (k, f) in out.enumerated() {
            let i = inputs.firstIndex(of: f.plane(0))
            XCTAssertNotNil(i)
            if let i { XCTAssertTrue(i == 2 * k || i == 2 * k + 1, "slot \(k) shows input \(i)") }
        }
        XCTAssertEqual(Set(out.map { $0.plane(0) }).count, 60)
    }

    // MARK: rawvideo

    func makeRawFile(_ dir: String) throws -> String {
        let path = dir + "/x.yuv"
        try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10", "-frames", "20",
                               "-pix_fmt", "nv12", "-f", "rawvideo", path])
        return path
    }

    func testRawvideoReadsEveryFrameAndLoops() throws {
        let dir = TestSupport.scratch(name)
        let path = try makeRawFile(dir)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(bytes.count, 20 * 320 * 240 * 3 / 2)
        try run("""
        nodes:
          once: {type: rawvideo, path: x.yuv, size: 320x240, format: nv12, rate: 10}
          twice: {type: rawvideo, path: x.yuv, size: 320x240, format: nv12, rate: 10, loop: 2, orientation: left}
          a: {type: collect, in: once, key: once}
          b: {type: collect, in: twice, key: twice}
        """, in: dir)
        let once = frames("once"), twice = frames("twice")
        XCTAssertEqual(once.count, 20)
        XCTAssertEqual(twice.count, 40)
        XCTAssertEqual(twice.map(\.pts), Array(0..<40))
        XCTAssertEqual(twice[0].orientation, .left)
        func picture(_ f: Frame) -> Data {
            Data(bytes: f.plane(0)!, count: 320 * 240 * 3 / 2)
        }
        let frameSize = 320 * 240 * 3 / 2
        for i in [0, 7, 19] {
            XCTAssertEqual(picture(once[i]), bytes.subdata(in: i * frameSize..<(i + 1) * frameSize), "frame \(i) is the file's")
            XCTAssertEqual(once[i].seconds, Double(i) / 10, accuracy: 1e-9)
        }
        XCTAssertEqual(picture(twice[25]), picture(once[5]), "the second play starts over")
    }

    func testRawvideoRefusesFileOfWrongSize() throws {
        let dir = TestSupport.scratch(name)
        _ = try makeRawFile(dir)
        let path = dir + "/test.pipe"
        try """
        nodes:
          src: {type: rawvideo, path: x.yuv, size: 320x250, format: nv12}
          out: {type: collect, in: src, key: out}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let checked = Checker(registry: Self.registry).check(path: path)
        XCTAssertFalse(checked.isValid)
        let text = checked.diagnostics.map(\.description).joined(separator: "\n")
        XCTAssertTrue(text.contains("'x.yuv' holds 2304000 bytes"), text)
        XCTAssertTrue(text.contains("test.pipe:2:"), "points at the path option: \(text)")
    }
}
