import AVGraphTesting
import Foundation
import XCTest

/// `avgraph serve`'s doors under what a port scanner, a stuck NAT or a slowloris sends: TCP
/// connections that never speak and SRT handshakes never finished, hundreds at a time and
/// renewed as serve closes them, while real phones publish. A connection that has proved nothing
/// never keeps a newcomer out (issue 48: 64 silent connections used to lock every phone out).
final class ServeDoorTests: XCTestCase {
    func testFiveHundredSilentConnectionsAndHalfDoneSrtHandshakesBesideTwelvePublishers() throws {
        Self.raiseFileLimit()
        let dir = CLI.scratch("serve-door")
        _ = ServeTests.clip
        let backend = try ServeBackend()
        defer { backend.stop() }
        let (runtime, environment) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let rtmp = try LoopbackPort.free(), srt = try LoopbackPort.free()
        let serve = try ServeTests.startServe([ServeTests.template(dir, idle: "1s"), "--listen", "rtmp://127.0.0.1:\(rtmp)",
                                               "--listen", "srt://127.0.0.1:\(srt)", "--open"] + backend.hookArguments(),
                                              dir: dir, environment: environment, in: self)
        let pid = serve.process.processIdentifier
        let before = Self.status(pid)

        // 500 silent TCP connections at once, then a stream of new ones (100 a second) for as long
        // as the phones publish, so serve always holds about 500 whatever it closes.
        let flood = SilentFlood(port: rtmp)
        let opened = flood.open(500)
        XCTAssertEqual(opened, 500, "the kernel and serve took every silent connection")
        flood.start(perSecond: 100)
        defer { flood.stop() }
        // 500 SRT handshakes answered (induction) and never concluded, from 500 UDP sockets.
        let answered = SrtInduction.halfDone(500, port: srt)
        print("serve-door: \(answered) of 500 SRT inductions answered, none concluded")
        XCTAssertEqual(answered, 500, "the SRT listener answers every induction (it keeps no state for them)")
        // And callers that finish the handshake, then say nothing.
        let mute = try (0..<10).map { _ in try SrtInduction.muteCaller(port: srt) }
        defer { for p in mute where p.isRunning { p.terminate() } }
        let crowded = Self.status(pid)

        var publishers = try (1...8).map { try ServeTests.publish("rtmp://127.0.0.1:\(rtmp)/live/door\($0)") }
        publishers += try (9...12).map { try ServeTests.publish("srt://127.0.0.1:\(srt)?streamid=door\($0)") }
        defer { for p in publishers where p.isRunning { p.terminate() } }
        var peak = crowded
        while publishers.contains(where: \.isRunning) {
            let now = Self.status(pid)
            peak = (max(peak.rss, now.rss), max(peak.threads, now.threads))
            usleep(250_000)
        }
        flood.stop()
        for p in mute where p.isRunning { p.terminate() }
        print("serve-door: serve before: \(before.rss / 1024) MB, \(before.threads) threads; with 500 silent TCP + 500 half SRT + 10 mute callers: "
              + "\(crowded.rss / 1024) MB, \(crowded.threads) threads; peak with 12 publishers: \(peak.rss / 1024) MB, \(peak.threads) threads "
              + "(runs are processes of their own); silent connections opened: \(flood.total)")
        XCTAssertLessThan(crowded.threads - before.threads, 20, "silent connections cost no thread each")
        XCTAssertLessThan(crowded.rss - before.rss, 64 * 1024, "and little memory (kB)")
        for (i, p) in publishers.enumerated() { XCTAssertEqual(p.terminationStatus, 0, "publisher door\(i + 1)'s ffmpeg") }

        // Each run ends 1 s (idle) after its publisher; then every hook is out.
        let end = Date().addingTimeInterval(30)
        while Date() < end && backend.hooks.filter({ ($0["body"] as? [String: Any])?["event"] as? String == "recording" }).count < 12 {
            usleep(200_000)
        }
        kill(pid, SIGTERM)
        XCTAssertEqual(serve.waitForExit(timeout: 30), 0, serve.stderr)

        let files = ServeTests.recordings(dir)
        for n in 1...12 {
            let key = "door\(n)"
            guard let name = files.first(where: { $0.hasPrefix(key + "-") }) else {
                XCTFail("no recording for \(key): \(files)\n\(serve.stderr.suffix(3000))")
                continue
            }
            let m = try ServeTests.measure(dir + "/rec/" + name)
            print("serve-door: \(key): video \(String(format: "%.3f", m.video)) s (\(m.frames) frames), audio \(String(format: "%.3f", m.audio)) s")
            XCTAssertEqual(m.video, ServeTests.seconds, accuracy: 0.3, "\(key): seconds of video")
            XCTAssertEqual(Double(m.frames), ServeTests.seconds * 30, accuracy: 9, "\(key): pictures")
            XCTAssertEqual(m.audio, ServeTests.seconds, accuracy: 0.4, "\(key): seconds of audio")
        }
        let bodies = backend.hooks.compactMap { $0["body"] as? [String: Any] }
        for n in 1...12 {
            let events = bodies.filter { $0["key"] as? String == "door\(n)" }.compactMap { $0["event"] as? String }
            XCTAssertEqual(events, ["publish", "unpublish", "recording"], "door\(n)'s hooks")
        }
        XCTAssertEqual(bodies.count, 36, "no hook for a connection that proved nothing")
        let lines = serve.stderr.split(separator: "\n")
        print("serve-door: serve's log: \(lines.count) lines; \(lines.filter { $0.contains("gave its place") }.count) about displaced connections, "
              + "\(lines.filter { $0.contains("timed out") || $0.contains("sent nothing for") }.count) about timeouts")
        XCTAssertTrue(serve.stderr.contains("gave its place to a newcomer"), "the displaced are said: \(serve.stderr.suffix(2000))")
        XCTAssertLessThan(lines.count, 400, "a flood is summarized, not a line per connection")
    }

    /// VmRSS (kB) and threads of a process.
    static func status(_ pid: Int32) -> (rss: Int, threads: Int) {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            text.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                .flatMap { Int($0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") } ?? 0
        }
        return (field("VmRSS"), field("Threads"))
    }

    /// Room for a thousand sockets in this process (the soft limit may be 1024).
    static func raiseFileLimit() {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = max(limit.rlim_cur, min(limit.rlim_max, 16384))
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// TCP connections to a port that never send a byte: `open(n)` at once, then `start` opens new
/// ones at a rate on a thread of its own; each is closed from this side after 10 s (serve closes
/// them sooner: its handshake timeout, or a newcomer's place).
final class SilentFlood: @unchecked Sendable {
    let port: Int
    private let state = NSLock()
    private var held: [(fd: Int32, at: Date)] = []
    private var running = false
    private var thread: Thread?
    private(set) var total = 0

    init(port: Int) { self.port = port }

    @discardableResult
    func open(_ n: Int) -> Int {
        var opened = 0
        for _ in 0..<n {
            let fd = LoopbackPort.connect(port)
            guard fd >= 0 else { continue }
            opened += 1
            state.withLock {
                held.append((fd, Date()))
                total += 1
            }
        }
        return opened
    }

    func start(perSecond: Int) {
        state.withLock { running = true }
        let t = Thread { [self] in
            while state.withLock({ running }) {
                open(max(1, perSecond / 20))
                let old = state.withLock { () -> [Int32] in
                    let cut = Date().addingTimeInterval(-10)
                    let (gone, kept) = (held.filter { $0.at < cut }, held.filter { $0.at >= cut })
                    held = kept
                    return gone.map(\.fd)
                }
                for fd in old { close(fd) }
                usleep(50_000)
            }
        }
        thread = t
        t.start()
    }

    func stop() {
        state.withLock { running = false }
        while thread?.isFinished == false { usleep(10_000) }
        let all = state.withLock { () -> [Int32] in
            defer { held.removeAll() }
            return held.map(\.fd)
        }
        for fd in all { close(fd) }
    }
}

/// SRT callers that start the handshake and never finish it, written from SRT's specification
/// (draft-sharabayko-srt, 3.2.1: the caller's induction request, a handshake control packet of
/// version 4 with a zero cookie; the listener answers version 5 with its cookie).
enum SrtInduction {
    /// Sends an induction from each of `n` UDP sockets and counts the listener's answers.
    static func halfDone(_ n: Int, port: Int) -> Int {
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        var address = LoopbackPort.loopback(port)
        for i in 0..<n {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { continue }
            sockets.append(fd)
            var packet = [UInt8](repeating: 0, count: 64)
            func put(_ value: UInt32, at offset: Int) { for b in 0..<4 { packet[offset + b] = UInt8(truncatingIfNeeded: value >> (24 - 8 * b)) } }
            put(0x8000_0000, at: 0)             // control packet, type 0: handshake
            put(UInt32(i), at: 8)               // timestamp
            put(4, at: 16)                      // version 4: the induction request
            put(2, at: 20)                      // encryption 0, extension field 2
            put(UInt32.random(in: 0..<(1 << 31)), at: 24)  // initial sequence number
            put(1500, at: 28)                   // MTU
            put(8192, at: 32)                   // flow window
            put(1, at: 36)                      // handshake type: induction
            put(UInt32(0x1000 + i), at: 40)     // the caller's socket id
            put(0x7F00_0001, at: 48)            // peer address
            _ = packet.withUnsafeBytes { bytes in
                withUnsafePointer(to: &address) { a in
                    a.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
        }
        var answered = 0
        var buffer = [UInt8](repeating: 0, count: 1500)
        for fd in sockets {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 2000) == 1 else { continue }
            let got = recv(fd, &buffer, buffer.count, 0)
            // A handshake back, version 5, handshake type induction.
            if got >= 64, buffer[0] & 0x80 != 0, buffer[19] == 5, buffer[39] == 1 { answered += 1 }
        }
        return answered
    }

    /// srt-live-transmit calling with a stream id and nothing to send (its input never speaks).
    static func muteCaller(port: Int) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["srt-live-transmit", "-q", "file://con", "srt://127.0.0.1:\(port)?streamid=mute"]
        // A pipe nobody writes to: its input never speaks, and it stays open until the caller is ended.
        p.standardInput = Pipe()
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }
}
