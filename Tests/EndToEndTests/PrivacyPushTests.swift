import AVGraphTesting
import Foundation
import XCTest

/// 100 in-band privacy switches at random times over the socket framing (written here by hand,
/// from docs/INGEST.md), recorded to an MP4 and pushed live to nginx-rtmp, which records what it
/// received: in both, 0 pictures leaked and 0 covered wrongly.
final class PrivacyPushTests: XCTestCase {
    static let seconds = 12.0
    static let cards: [String: (r: Int, g: Int, b: Int)] = ["red": (224, 32, 32), "blue": (32, 64, 224)]

    /// The 32-byte little-endian header of docs/INGEST.md.
    static func header(version: UInt8, type: UInt8, timestamp: Int64, payload: Int, a: Int, b: Int, format: UInt8, orientation: UInt8) -> [UInt8] {
        var h = [UInt8](repeating: 0, count: 32)
        h[0...3] = [0x41, 0x56, 0x47, 0x49]
        h[4] = version
        h[5] = type
        for i in 0..<8 { h[8 + i] = UInt8(truncatingIfNeeded: UInt64(bitPattern: timestamp) >> (8 * UInt64(i))) }
        for (v, o) in [(payload, 16), (a, 20), (b, 24)] { for i in 0..<4 { h[o + i] = UInt8(truncatingIfNeeded: v >> (8 * i)) } }
        h[28] = format
        h[29] = orientation
        return h
    }

    func testHundredSocketSwitchesLeakNothingInTheFileNorInTheRtmpPushNginxRecords() throws {
        let nginx = try NginxRtmp()
        let dir = CLI.scratch()
        for (name, color) in [("red", "0xE02020"), ("blue", "0x2040E0")] {
            _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=\(color):s=64x48", "-frames:v", "1", dir + "/\(name).png"])
        }
        let socketPath = "/tmp/avg-push-\(UUID().uuidString.prefix(8)).sock"
        let (w, h) = (PrivacyWitness.width, PrivacyWitness.height)
        CLI.write("""
        pipeline: privacypush
        nodes:
          phone:   {type: socket, path: \(socketPath), size: \(w)x\(h), buffer: 30}
          upright: {type: orient, in: phone.video}
          fit:     {type: resize, in: upright, size: \(w)x\(h), mode: fit, quality: fast}
          privacy: {type: privacy, in: fit, cards: {red: red.png, blue: blue.png}}
          smooth:  {type: fps, in: privacy, rate: 30}
          video:   {type: h264, in: smooth, preset: ultrafast, bitrate: 4M, gop: 30, queue: {size: 120}}
          out:     {type: file, in: [video], path: out.mp4, overwrite: true}
          live:    {type: rtmp, in: [video], url: "\(nginx.url("privacy"))"}
        """, to: dir + "/p.pipe")
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor(timeout: 20) { $0["event"] as? String == "listening" }, run.stderr)
        let fd = try PrivacySocket.connect(socketPath)
        defer { close(fd) }
        let switches = PrivacyWitness.randomSwitches(100, in: 0.4...(Self.seconds - 0.4), cards: ["red", "blue"], seed: 0x5EED_0003)
        var pending = switches[...]
        let count = Int(Self.seconds * 30)
        let start = Date()
        for i in 0..<count {
            let t = Double(i) / 30
            while let s = pending.first, s.time <= t + 1e-9 {
                let name = Array((s.card ?? "").utf8)
                PrivacySocket.write(fd, Self.header(version: 2, type: 5, timestamp: Int64((s.time * 1e6).rounded()), payload: name.count,
                                                    a: s.on ? 1 : 0, b: 0, format: 0, orientation: 0) + name)
                pending = pending.dropFirst()
            }
            let due = start.addingTimeInterval(t).timeIntervalSinceNow
            if due > 0 { usleep(UInt32(due * 1e6)) }
            let picture = PrivacyWitness.picture(i)
            PrivacySocket.write(fd, Self.header(version: 1, type: 1, timestamp: Int64((t * 1e6).rounded()), payload: picture.count,
                                                a: w, b: h, format: 1, orientation: 1) + picture)
        }
        PrivacySocket.write(fd, Self.header(version: 1, type: 4, timestamp: 0, payload: 0, a: 0, b: 0, format: 0, orientation: 0))
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        nginx.stop()
        let witness = PrivacyWitness(switches: switches, defaultCard: "blue")
        let recorded = try FileManager.default.contentsOfDirectory(atPath: nginx.recordings).filter { $0.hasSuffix(".flv") }
        XCTAssertEqual(recorded.count, 1, "nginx recorded one session: \(recorded)")
        for (what, path) in [("MP4", dir + "/out.mp4")] + recorded.map({ ("nginx's recording", nginx.recordings + "/" + $0) }) {
            let shown = try PrivacyWitness.decode(path, cards: Self.cards)
            let c = witness.count(shown, pushed: count)
            print("privacy switches: 100, \(what): \(c)")
            XCTAssertGreaterThanOrEqual(c.pictures, count - 3, "\(what): pictures")
            XCTAssertEqual(c.leaked, 0, "\(what): pictures shown that a switch covered")
            XCTAssertEqual(c.wronglyCovered, 0, "\(what): pictures covered that no switch covered")
            XCTAssertEqual(c.unknown, 0, "\(what): pictures neither screen nor card")
            XCTAssertGreaterThan(c.covered, 20, what)
        }
    }
}

/// A producer's end of a `socket` source.
enum PrivacySocket {
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
            if Date() > deadline { throw NSError(domain: "PrivacySocket", code: 1, userInfo: [NSLocalizedDescriptionKey: "cannot connect to \(path)"]) }
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
