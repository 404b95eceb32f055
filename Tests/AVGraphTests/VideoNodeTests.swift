import AVGraph
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
final class CollectSink: Node, @unchecked Sendable {
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

    func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        if let f = buffer.frame { CollectedFrames.shared.append(key, f) }
    }
}

final class VideoNodeTests: XCTestCase {
    static let registry: NodeRegistry = {
        let r = BuiltinNodes.registry()
        try! r.register(CollectSink.self)
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
        try run("""
        nodes:
          src: {type: testsrc, size: 120x260, rate: 10, duration: 0.5s}
          raw: {type: collect, in: src, key: raw}
          up: {type: orient, in: src}
          out: {type: collect, in: up, key: out}
        """)
        let raw = frames("raw"), out = frames("out")
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
        XCTAssertEqual(CollectedFrames.shared.format("out")?.sizeVaries, true)
    }

    func testLeftTaggedBufferIsTurnedClockwise() throws {
        try run("""
        nodes:
          src: {type: testsrc, size: 120x260, rate: 10, duration: 0.3s, orientation: left}
          raw: {type: collect, in: src, key: raw}
          up: {type: orient, in: src}
          out: {type: collect, in: up, key: out}
        """)
        let raw = frames("raw"), out = frames("out")
        XCTAssertEqual(out.count, 3)
        for (r, o) in zip(raw, out) {
            XCTAssertEqual(r.orientation, .left)
            XCTAssertEqual([r.width, r.height], [120, 260])
            // `left`: the picture's top is at the buffer's left, so its top-left corner is the buffer's bottom-left.
            let c = corners(r, side: 24)
            XCTAssertGreaterThan(c[2], 200, "stored corners \(c)")
            XCTAssertEqual([o.width, o.height], [260, 120])
            XCTAssertEqual(o.orientation, .up)
            XCTAssertEqual(o.pts, r.pts)
            assertMarkerTopLeft(o, side: 24, "frame \(o.pts)")
        }
    }

    func testMirroredTagsAndScheduleComeOutUpright() throws {
        try run("""
        nodes:
          src:
            type: testsrc
            size: 120x260
            rate: 10
            duration: 2s
            format: yuv420p
            orientation: [{at: 0s, value: left-mirrored}, {at: 0.5s, value: down}, {at: 1s, value: up-mirrored}, {at: 1.5s, value: right}]
          up: {type: orient, in: src}
          out: {type: collect, in: up, key: out}
        """)
        let out = frames("out")
        XCTAssertEqual(out.count, 20)
        for o in out {
            let turned = (0..<5).contains(o.pts) || (15..<20).contains(o.pts)
            XCTAssertEqual([o.width, o.height], turned ? [260, 120] : [120, 260], "frame \(o.pts)")
            assertMarkerTopLeft(o, side: 24, "frame \(o.pts)")
        }
    }
}
