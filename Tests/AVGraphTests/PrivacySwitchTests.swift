import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// The in-band privacy switch: a producer's pictures each carry their own number (ten black or
/// white blocks, a pattern no card resembles), with 100 switches at random timestamps between
/// them, over the socket framing and the Swift push API. The MP4 is decoded and every picture
/// is checked against the switches: covered exactly when a switch said so, by the card it named.
final class PrivacySwitchTests: XCTestCase {
    static let width = 320, height = 240, rate = 30.0
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

    struct Switch { var time: Double; var on: Bool; var card: String? }

    /// 100 switches at random times (not on picture times), on and off at random, naming a card or none.
    static func randomSwitches(seed: UInt64) -> [Switch] {
        var rng = SplitMix(seed: seed)
        return (0..<100).map { _ in
            Switch(time: 0.4 + rng.unit() * (seconds - 0.8), on: rng.unit() < 0.5, card: [nil, "red", "blue"][Int(rng.unit() * 3) % 3])
        }.sorted { $0.time < $1.time }
    }

    /// What picture `i` must show: nil for the screen, else the card's name ("red": the default, first by name).
    static func expected(_ i: Int, _ switches: [Switch]) -> String? {
        let t = Double(i) / rate
        var state: Switch?
        for s in switches where s.time <= t + 1e-9 { state = s }
        guard let s = state, s.on else { return nil }
        return s.card ?? "blue"
    }

    /// NV12 picture `i`: ten blocks across the middle, white for a 1 bit, black for 0; gray chroma.
    static func picture(_ i: Int) -> [UInt8] {
        var y = [UInt8](repeating: 16, count: width * height)
        for bit in 0..<10 where (i >> bit) & 1 == 1 {
            for row in 96..<144 { for col in (bit * 32 + 2)..<(bit * 32 + 30) { y[row * width + col] = 235 } }
        }
        return y + [UInt8](repeating: 128, count: width * height / 2)
    }

    enum Shown: Equatable { case screen(Int), card(String), unknown }

    /// Each decoded picture with its time: a card by colour, else the number its blocks spell.
    static func decode(_ path: String) throws -> [(time: Double, shown: Shown)] {
        let times = try TestSupport.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time",
                                           "-of", "csv=p=0", path]).split(separator: "\n").compactMap { Double($0) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = [UInt8](out.fileHandleForReading.readDataToEndOfFile())
        p.waitUntilExit()
        let size = width * height * 3
        var shown: [(Double, Shown)] = []
        for (k, start) in stride(from: 0, to: data.count - size + 1, by: size).enumerated() {
            func px(_ x: Int, _ y: Int) -> (Int, Int, Int) {
                let o = start + (y * width + x) * 3
                return (Int(data[o]), Int(data[o + 1]), Int(data[o + 2]))
            }
            let c = px(160, 40)
            let s: Shown
            if c.0 > 150 && c.1 < 90 && c.2 < 90 { s = .card("red") } else if c.2 > 150 && c.0 < 90 && c.1 < 120 { s = .card("blue") } else if abs(c.0 - c.1) < 20 && abs(c.1 - c.2) < 20 {
                var n = 0
                for bit in 0..<10 where px(bit * 32 + 16, 120).1 > 128 { n |= 1 << bit }
                s = .screen(n)
            } else { s = .unknown }
            shown.append((k < times.count ? times[k] : -1, s))
        }
        return shown
    }

    /// Counts leaked (screen where a card was due) and wrongly covered pictures (a card where the
    /// screen or another card was due). A card's picture number comes from its time and the
    /// constant offset the screen pictures show.
    func assertExact(_ path: String, _ switches: [Switch], pushed: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let shown = try Self.decode(path)
        XCTAssertEqual(shown.count, pushed, "every picture pushed is in the recording once", file: file, line: line)
        var offsets: [Int: Int] = [:]
        for (t, s) in shown { if case .screen(let n) = s { offsets[Int((t * Self.rate).rounded()) - n, default: 0] += 1 } }
        let offset = try XCTUnwrap(offsets.max { $0.value < $1.value }?.key, "no screen picture decoded", file: file, line: line)
        var leaked = 0, wrong = 0, unknown = 0, covered = 0
        for (t, s) in shown {
            switch s {
            case .screen(let n): if Self.expected(n, switches) != nil { leaked += 1 }
            case .card(let c):
                covered += 1
                let n = Int((t * Self.rate).rounded()) - offset
                if Self.expected(n, switches) != c { wrong += 1 }
            case .unknown: unknown += 1
            }
        }
        let due = (0..<pushed).filter { Self.expected($0, switches) != nil }.count
        print("privacy switches: \(switches.count), pictures \(shown.count), covered \(covered) (due \(due)), leaked \(leaked), wrongly covered \(wrong)")
        XCTAssertEqual(leaked, 0, "pictures shown that a switch covered", file: file, line: line)
        XCTAssertEqual(wrong, 0, "pictures covered that no switch covered (or by the wrong card)", file: file, line: line)
        XCTAssertEqual(unknown, 0, "pictures neither screen nor card", file: file, line: line)
        XCTAssertGreaterThan(covered, 20, file: file, line: line)
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
            let p = Self.picture(i)
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

    func testHundredSwitchesOverTheSocketCoverExactlyTheirPictures() throws {
        let dir = TestSupport.scratch()
        try Self.cards(in: dir)
        let path = "/tmp/avg-privacy-\(UUID().uuidString.prefix(8)).sock"
        try Self.pipe(source: "{type: socket, path: \(path), size: \(Self.width)x\(Self.height), buffer: 30}")
            .write(toFile: dir + "/p.pipe", atomically: true, encoding: .utf8)
        let live = try LivePipeline(path: dir + "/p.pipe", registry: TestSupport.registry)
        live.start()
        let fd = try Self.connect(path)
        defer { close(fd) }
        let switches = Self.randomSwitches(seed: 0x5EED_0002)
        let pushed = Self.produce(switches, picture: { i, t in
            let h = IngestFraming.Header.video(.nv12, width: Self.width, height: Self.height, timestamp: Int64((t * 1e6).rounded()), orientation: .up)
            Self.write(fd, IngestFraming.encode(h) + Self.picture(i))
        }, privacy: { s in
            let name = Array((s.card ?? "").utf8)
            Self.write(fd, IngestFraming.encode(.privacy(on: s.on, timestamp: Int64((s.time * 1e6).rounded()), cardBytes: name.count)) + name)
        })
        Self.write(fd, IngestFraming.encode(IngestFraming.Header(type: .end)))
        try live.wait()
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

    static func connect(_ path: String) throws -> Int32 {
        let deadline = Date().addingTimeInterval(10)
        while true {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { b in _ = path.utf8CString.withUnsafeBytes { memcpy(b.baseAddress!, $0.baseAddress!, $0.count) } }
            let r = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            if r == 0 { return fd }
            close(fd)
            if Date() > deadline { throw MediaError("cannot connect to \(path)") }
            usleep(50_000)
        }
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + off, $0.count - off, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            off += n
        }
    }
}

extension SplitMix {
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}
