import AVGraph
import AVGraphNodes
import AVGraphTesting
import Foundation
import XCTest

/// The in-band privacy switch: a producer's pictures each carry their own number (ten black or
/// white blocks, a pattern no card resembles), with 100 switches at random timestamps between
/// them, through the Swift push API (the socket framing: EndToEndTests' PrivacyPushTests). The MP4 is decoded and every picture
/// is checked against the switches: covered exactly when a switch said so, by the card it named.
final class PrivacySwitchTests: XCTestCase {
    static let width = PrivacyWitness.width, height = PrivacyWitness.height, rate = 30.0
    static let seconds = 12.0

    /// Two solid cards the decoder tells apart from a numbered screen (gray) by colour.
    static func cards(in dir: String) throws {
        for (name, color) in [("red", "0xE02020"), ("blue", "0x2040E0")] {
            try TestSupport.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=\(color):s=64x48", "-frames:v", "1",
                                   dir + "/\(name).png"])
        }
    }

    static func pipe(source: String) -> String {
        """
        pipeline: privacyswitch\(UUID().uuidString.prefix(6).lowercased())
        nodes:
          phone:   \(source)
          upright: {type: orient, in: phone.video}
          fit:     {type: resize, in: upright, size: \(width)x\(height), mode: fit, quality: fast}
          privacy: {type: privacy, in: fit, cards: {red: red.png, blue: blue.png}}
          smooth:  {type: fps, in: privacy, rate: 30}
          video:   {type: h264, in: smooth, preset: ultrafast, bitrate: 4M, queue: {size: 120}}
          out:     {type: file, in: [video], path: out.mp4, overwrite: true}
        """
    }

    typealias Switch = PrivacyWitness.Switch
    static let cardColors: [String: (r: Int, g: Int, b: Int)] = ["red": (224, 32, 32), "blue": (32, 64, 224)]

    /// 100 switches at random times (not on picture times), on and off at random, naming a card or none.
    static func randomSwitches(seed: UInt64) -> [Switch] {
        PrivacyWitness.randomSwitches(100, in: 0.4...(seconds - 0.4), cards: ["red", "blue"], seed: seed)
    }

    /// 0 leaked (a screen where a card was due), 0 wrongly covered (a card where the screen or another card was due).
    func assertExact(_ path: String, _ switches: [Switch], pushed: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let shown = try PrivacyWitness.decode(path, cards: Self.cardColors)
        XCTAssertEqual(shown.count, pushed, "every picture pushed is in the recording once", file: file, line: line)
        // A switch naming no card shows the node's first card by name: blue.
        let c = PrivacyWitness(switches: switches, defaultCard: "blue").count(shown, pushed: pushed)
        print("privacy switches: \(switches.count), \(c)")
        XCTAssertEqual(c.leaked, 0, "pictures shown that a switch covered", file: file, line: line)
        XCTAssertEqual(c.wronglyCovered, 0, "pictures covered that no switch covered (or by the wrong card)", file: file, line: line)
        XCTAssertEqual(c.unknown, 0, "pictures neither screen nor card", file: file, line: line)
        XCTAssertEqual(c.covered, c.due, file: file, line: line)
        XCTAssertGreaterThan(c.covered, 20, file: file, line: line)
    }

    /// Sends pictures and switches in time order, each switch just before the first picture it covers, in realtime.
    static func produce(_ switches: [Switch], picture: (Int, Double) -> Void, privacy: (Switch) -> Void) -> Int {
        let count = Int(seconds * rate)
        var pending = switches[...]
        let start = AppSourceTests.wall()
        for i in 0..<count {
            let t = Double(i) / rate
            while let s = pending.first, s.time <= t + 1e-9 { privacy(s); pending = pending.dropFirst() }
            let due = start + t, now = AppSourceTests.wall()
            if due > now { usleep(UInt32((due - now) * 1e6)) }
            picture(i, t)
        }
        return count
    }

    func testHundredSwitchesThroughThePushAPICoverExactlyTheirPictures() throws {
        let dir = TestSupport.scratch()
        try Self.cards(in: dir)
        try Self.pipe(source: "{type: app, size: \(Self.width)x\(Self.height), buffer: 30}").write(toFile: dir + "/p.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/p.pipe", registry: TestSupport.registry)
        live.start()
        let source = try XCTUnwrap(live.appSource(named: "phone"))
        let switches = Self.randomSwitches(seed: 0x5EED_0001)
        var refused = 0
        let pushed = Self.produce(switches, picture: { i, t in
            let p = PrivacyWitness.picture(i)
            let r = p.withUnsafeBytes { b in
                source.pushNV12(width: Self.width, height: Self.height, y: b.baseAddress!, yStride: Self.width,
                                uv: b.baseAddress! + Self.width * Self.height, uvStride: Self.width, time: t)
            }
            if r != .taken { refused += 1 }
        }, privacy: { s in XCTAssertTrue(source.setPrivacy(s.on, card: s.card, time: s.time)) })
        source.finish()
        try live.wait()
        XCTAssertEqual(refused, 0)
        try assertExact(dir + "/out.mp4", switches, pushed: pushed)
    }

    func testPrivacyMessageIsVersion2AndAVersion1ProducerStillParses() throws {
        let on = IngestFraming.encode(.privacy(on: true, timestamp: 5_000_000, cardBytes: 6))
        XCTAssertEqual(on[4], 2)
        let h = try on.withUnsafeBytes { try IngestFraming.parse($0) }
        XCTAssertEqual(h.type, .privacy)
        XCTAssertEqual(h.a, 1)
        XCTAssertEqual(h.timestamp, 5_000_000)
        var v1 = on
        v1[4] = 1
        XCTAssertThrowsError(try v1.withUnsafeBytes { try IngestFraming.parse($0) }, "a privacy message claiming version 1 is refused")
        let video = IngestFraming.encode(.video(.nv12, width: 4, height: 2, timestamp: 0, orientation: .up))
        XCTAssertEqual(video[4], 1, "other messages stay version 1, which older avgraph reads")
        XCTAssertNoThrow(try video.withUnsafeBytes { try IngestFraming.parse($0) })
        var long = IngestFraming.encode(.privacy(on: false, timestamp: 0, cardBytes: 65))
        XCTAssertThrowsError(try long.withUnsafeBytes { try IngestFraming.parse($0) })
        long[20] = 2
        XCTAssertThrowsError(try long.withUnsafeBytes { try IngestFraming.parse($0) })
    }

    func testCheckWarnsAboutAScreenBranchThatBypassesPrivacyToASink() throws {
        let dir = TestSupport.scratch()
        let card = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../assets/privacy.png").standardized.path
        func pipe(_ leakyInput: String) -> String {
            """
            nodes:
              screen:  {type: testsrc, size: 320x240, duration: 1s}
              privacy: {type: privacy, in: screen, image: \(card)}
              safe:    {type: h264, in: privacy}
              leaky:   {type: h264, in: \(leakyInput)}
              out:     {type: file, in: [safe], path: out.mp4}
              live:    {type: file, in: [leaky], path: live.mp4}
            """
        }
        let bypass = TestSupport.check(pipe("screen"), in: dir)
        XCTAssertTrue(bypass.isValid, bypass.diagnostics.description)
        let warnings = bypass.diagnostics.filter { $0.severity == .warning }
        XCTAssertEqual(warnings.count, 1, warnings.description)
        XCTAssertTrue(warnings.first?.message.contains("'live' gets the pictures of 'screen' without a privacy node") ?? false, warnings.description)
        XCTAssertEqual(warnings.first?.location.line, 7, "at the sink that records around the card")
        let both = TestSupport.check(pipe("privacy"), in: dir)
        XCTAssertEqual(both.diagnostics.filter { $0.severity == .warning }.count, 0, both.diagnostics.description)
    }
}
