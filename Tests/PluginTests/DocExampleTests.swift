// DimNode below is docs/WRITING-NODES.md's example (less `public`): the doc's code compiles and does what it says.
import XCTest
import AVGraph
import AVGraphTesting
import CFFmpeg

final class DimNode: Filter, Node {
    // The contract: what `check` and `inspect` know before anything runs.
    static let typeName = "dim"
    static let summary = "darkens the picture"
    static let inputs = [PadSpec("video", [.rawVideo], doc: "yuv420p or nv12")]
    static let outputs = [PadSpec("video", [.rawVideo], doc: "the same pictures, darker")]
    // Each option declared once (name, range, default, live, doc) and read back as its own type.
    static let amount = Setting.number("amount", 0...1, default: 0.5, live: true, doc: "0 leaves the picture, 1 makes it black")
    static let options = [amount.spec]

    // The format rule: output formats from input formats, or a refusal `check` reports in place.
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let input = n.format(on: "video") else { throw NegotiationError("input 'video' is not connected") }
        guard ["yuv420p", "nv12"].contains(input.pixelFormat) else {
            throw NegotiationError("dim takes yuv420p or nv12, got \(input.pixelFormat)", hint: "resize with format: yuv420p first")
        }
        return [input]
    }

    var amount: Double

    init(_ setup: NodeSetup) throws {
        amount = setup[Self.amount]
    }

    // Live changes, checked against the declaration by the runtime, arrive between two frames.
    override func set(option: String, to value: OptionValue) throws {
        if let a = try Self.amount.value(in: option, value) { amount = a }
    }

    // The work: one frame in, one frame out (same buffer; copied only if someone else holds it).
    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        try frame.makeWritable()
        let y = frame.plane(0)!, k = 1 - amount
        for row in 0..<frame.height {
            let line = y + row * frame.lineSize(0)
            for x in 0..<frame.width { line[x] = UInt8(max(0, 16 + Double(Int(line[x]) - 16) * k)) }
        }
        out.emit(frame)
    }
}

final class DocExampleTests: XCTestCase {
    func testTheDocumentedNodeAndHarnessSnippet() throws {
        let h = try NodeHarness(DimNode.self, options: "amount: 0.5",
                                inputs: [.video(width: 64, height: 64, pixelFormat: "yuv420p", frameRate: Rational(30, 1))])
        try h.feed(TestMedia.videoFrame(width: 64, height: 64) { _, _ in 216 })
        let out = try XCTUnwrap(h.emittedFrames().first)    // keep the frame: it owns the pixels
        XCTAssertEqual(out.plane(0)![0], 116)
        try h.set("amount", .number(1))                   // a live change, as `avgraph ctl` makes it
        try h.feed(TestMedia.videoFrame(width: 64, height: 64) { _, _ in 216 })
        let dark = try XCTUnwrap(h.emittedFrames().first)
        XCTAssertEqual(dark.plane(0)![0], 16)
    }
}
