import AVGraph
import AVGraphTesting
import Foundation
import XCTest

/// The watermark plugin's node, loaded from its library and driven through `NodeHarness`.
final class WatermarkNodeTests: XCTestCase {
    var type: any Node.Type { get throws { try XCTUnwrap(Plugins.registry()["watermark"]) } }
    let logo = Plugins.packageRoot + "/assets/privacy.png"

    func format(_ w: Int, _ h: Int, _ pixelFormat: String = "yuv420p") -> StreamFormat {
        .video(width: w, height: h, pixelFormat: pixelFormat, frameRate: Rational(30, 1))
    }

    /// Mean luma of a block.
    func luma(_ f: Frame, _ x: Int, _ y: Int, _ w: Int, _ h: Int) -> Double {
        var sum = 0
        for r in y..<(y + h) { for c in x..<(x + w) { sum += Int(f.plane(0)![r * f.lineSize(0) + c]) } }
        return Double(sum) / Double(w * h)
    }

    /// How many pixels of each 40x40 corner block (inset by the margin) differ from the flat input.
    func marked(_ f: Frame, margin: Int = 8) -> [String: Int] {
        var out: [String: Int] = [:]
        for (name, x, y) in [("top-left", margin, margin), ("top-right", f.width - margin - 40, margin),
                             ("bottom-left", margin, f.height - margin - 40), ("bottom-right", f.width - margin - 40, f.height - margin - 40)] {
            var n = 0
            for r in y..<(y + 40) { for c in x..<(x + 40) where f.plane(0)![r * f.lineSize(0) + c] != 60 { n += 1 } }
            out[name] = n
        }
        return out
    }

    func testTextLandsInTheChosenCornerOnly() throws {
        let h = try NodeHarness(type, options: "text: LIVE, corner: top-left, opacity: 1, margin: 8, scale: 0.3", inputs: [format(320, 180)])
        try h.feed(TestMedia.videoFrame(width: 320, height: 180, pts: 3) { _, _ in 60 })
        let f = try XCTUnwrap(h.emittedFrames().first)
        XCTAssertEqual(f.pts, 3)
        let m = marked(f)
        XCTAssertGreaterThan(m["top-left"]!, 100, "\(m)")
        for c in ["top-right", "bottom-left", "bottom-right"] { XCTAssertEqual(m[c], 0, "\(c): \(m)") }
    }

    func testCornerAndOpacityChangeLiveOnTheNextFrame() throws {
        let h = try NodeHarness(type, options: "image: \(logo), corner: top-left, opacity: 1, margin: 8, scale: 0.25",
                                inputs: [format(320, 180, "nv12")])
        try h.feed(TestMedia.videoFrame(width: 320, height: 180, pixelFormat: "nv12", pts: 0) { _, _ in 60 })
        try h.set("corner", .string("bottom-right"))
        try h.set("opacity", .number(0.5))
        XCTAssertThrowsError(try h.set("corner", .string("middle")))
        XCTAssertThrowsError(try h.set("margin", .int(3)), "margin is not live")
        try h.feed(TestMedia.videoFrame(width: 320, height: 180, pixelFormat: "nv12", pts: 1) { _, _ in 60 })
        try h.set("opacity", .number(0))
        try h.feed(TestMedia.videoFrame(width: 320, height: 180, pixelFormat: "nv12", pts: 2) { _, _ in 60 })
        let out = h.emittedFrames()
        XCTAssertEqual(out.map(\.pts), [0, 1, 2])
        let first = marked(out[0]), second = marked(out[1]), third = marked(out[2])
        XCTAssertGreaterThan(first["top-left"]!, 1000, "\(first)")
        XCTAssertEqual(first["bottom-right"], 0)
        XCTAssertEqual(second["top-left"], 0, "\(second)")
        XCTAssertGreaterThan(second["bottom-right"]!, 1000, "\(second)")
        XCTAssertEqual(third.values.reduce(0, +), 0, "opacity 0 draws nothing")
        // Half opacity: the card's bright lock is drawn halfway between the picture and the card.
        let full = luma(out[0], 8, 8, 80, 44), half = luma(out[1], 320 - 8 - 80, 180 - 8 - 44, 80, 44)
        XCTAssertEqual(half - 60, (full - 60) / 2, accuracy: 3, "full \(full), half \(half)")
        XCTAssertEqual(h.events(named: "applied").count, 3)
    }

    func testASharedFrameIsCopiedNotScribbledOn() throws {
        let h = try NodeHarness(type, options: "text: X, opacity: 1", inputs: [format(160, 90)])
        let original = try TestMedia.videoFrame(width: 160, height: 90) { _, _ in 60 }
        let kept = original.ref()
        try h.feed(original)
        XCTAssertNotEqual(h.emittedFrames().first?.plane(0), kept.plane(0))
        XCTAssertEqual(luma(kept, 0, 0, 160, 90), 60, "the other holder's picture is untouched")
    }

    func testCheckRefusesNeitherOrBothSourcesAndOtherPixelFormats() throws {
        XCTAssertThrowsError(try NodeHarness(type, options: "", inputs: [format(64, 64)]))
        XCTAssertThrowsError(try NodeHarness(type, options: "text: A, image: \(logo)", inputs: [format(64, 64)]))
        XCTAssertThrowsError(try NodeHarness(type, options: "text: A", inputs: [format(64, 64, "rgb24")]))
    }
}
