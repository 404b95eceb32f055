import AVGraphTesting
import Foundation
import XCTest

/// One encoder, several live destinations and a recording: each destination on its own, so one
/// that refuses or stalls costs the others nothing. Real servers on loopback (two nginx-rtmp,
/// an ffmpeg SRT listener), judged by decoding what each received.
final class RestreamTests: XCTestCase {
    static let seconds = 36

    /// SrtPushTests' broadcast (its `live` is the SRT destination, `c` here) with two RTMP
    /// destinations and a recording beside it: `refusing` has nothing listening at first,
    /// `stalling` is SIGSTOPped for 10 s; `c` and the file stay well.
    static func pipe(refusing: String, stalling: String, srt: String, record: String) -> String {
        SrtPushTests.pipe(url: srt, seconds: seconds).replacingOccurrences(of: "  live:   {type: srt", with: "  c:      {type: srt") + """

          a:      {type: rtmp, in: [video, audio], url: "\(refusing)", reconnect: {attempts: 100, backoff: 300ms..1s}}
          b:      {type: rtmp, in: [video, audio], url: "\(stalling)", timeout: 2s, reconnect: {attempts: 100, backoff: 300ms..1s}}
          record: {type: file, in: [video, audio], path: \(record), overwrite: true}
        """
    }

    func testARefusingAndAStalledDestinationCostTheOthersAndTheRecordingNothing() throws {
        try XCTSkipUnless(NginxRtmp.isAvailable, "nginx with libnginx-mod-rtmp is not installed (scripts/setup installs it)")
        let dir = CLI.scratch()
        let late = try NginxRtmp(port: LoopbackPort.free(), start: false)
        let stalling = try NginxRtmp()
        addTeardownBlock {
            // A stopped server must be let go before it can be stopped.
            if let pid = stalling.processIdentifier { kill(pid, SIGCONT) }
            stalling.stop()
            late.stop()
        }
        let srtPort = try LoopbackPort.free()
        let received = dir + "/srt.ts"
        let listener = try SrtPushTests.listener(port: srtPort, to: received)
        defer { if listener.isRunning { listener.terminate() } }
        usleep(500_000)
        CLI.write(Self.pipe(refusing: late.url(), stalling: stalling.url(), srt: "srt://127.0.0.1:\(srtPort)", record: dir + "/record.mp4"),
                  to: dir + "/restream.pipe")
        let run = try BackgroundRun(["run", dir + "/restream.pipe", "--events", "json"])
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }

        XCTAssertNotNil(run.waitFor(timeout: 30) { ($0["event"] as? String) == "stats" && ($0["media_time"] as? Double ?? 0) >= 6 }, run.stderr)
        let stallPid = try XCTUnwrap(stalling.processIdentifier)
        kill(stallPid, SIGSTOP)
        let stoppedAt = run.mediaTime
        sleep(4)
        try late.start() // the refusing destination appears
        sleep(6)
        kill(stallPid, SIGCONT)
        let resumedAt = run.mediaTime
        XCTAssertEqual(run.waitForExit(timeout: 90), 0, run.stderr)
        let end = Date().addingTimeInterval(15)
        while listener.isRunning && Date() < end { usleep(50_000) }
        stalling.stop()
        late.stop()

        let events = run.events
        let stats = events.filter { $0["event"] as? String == "stats" }
        func node(_ s: [String: Any], _ name: String) -> [String: Any]? {
            (s["nodes"] as? [[String: Any]])?.first { $0["node"] as? String == name }
        }
        let encoded = (node(try XCTUnwrap(stats.last), "video")?["emitted"] as? [Int])?.first ?? 0
        XCTAssertEqual(Double(encoded), Double(Self.seconds * 30), accuracy: 30, "pictures encoded")

        // The well destination and the recording: every picture the encoder made, decoded.
        let recorded = try CLI.videoFrameTimes(dir + "/record.mp4")
        let srtFrames = try CLI.videoFrameTimes(received)
        print("restream: encoded \(encoded), recorded \(recorded.count), srt received \(srtFrames.count); b stopped at \(stoppedAt) s, resumed at \(resumedAt) s")
        XCTAssertEqual(recorded.count, encoded, "the recording has every picture")
        XCTAssertEqual(srtFrames.count, encoded, "the SRT destination received every picture")
        XCTAssertEqual(try decodeErrors(received), "")
        XCTAssertEqual(try decodeErrors(dir + "/record.mp4"), "")
        for (name, times) in [("record", recorded), ("srt", srtFrames)] {
            let gaps = zip(times, times.dropFirst()).map { $1 - $0 }
            XCTAssertLessThan(gaps.max() ?? 1, 0.05, "\(name): no picture missing")
        }

        // No sink's input waited on another: each live sink's and the recording's input queue
        // held at most one picture (and the audio beside it) at every stats interval, nothing dropped there.
        for s in stats {
            for name in ["a", "b", "c", "record"] {
                let queue = node(s, name)?["queue"] as? [Int] ?? []
                XCTAssertLessThanOrEqual(queue.first ?? 0, 1, "\(name)'s video input at \(s["media_time"] ?? 0) s: \(queue)")
            }
        }
        XCTAssertEqual(node(try XCTUnwrap(stats.last), "record")?["dropped"] as? Int, 0, "the recording dropped nothing")
        XCTAssertNil(node(try XCTUnwrap(stats.last), "c")?["dropped_by_kind"], "the SRT destination dropped nothing")

        // The stalled destination: its queue kept within its buffer, drops counted and said, and
        // it came back: a session from its return to the end, starting on a keyframe.
        let bDrops = node(try XCTUnwrap(stats.last), "b")?["dropped_by_kind"] as? [String: Int] ?? [:]
        XCTAssertGreaterThan(bDrops["video"] ?? 0, 100, "b dropped video while stopped: \(bDrops)")
        XCTAssertTrue(events.contains { $0["event"] as? String == "dropped" && $0["node"] as? String == "b" }, "b said it dropped")
        XCTAssertLessThan(stats.compactMap { $0["queued_bytes"] as? Int }.max() ?? 0, 3_000_000, "queues within their bounds")
        let bSessions = try stalling.sessions.map { ($0, try CLI.videoFrameTimes($0)) }.filter { !$0.1.isEmpty }
        let after = try XCTUnwrap(bSessions.last, "b recorded nothing after its return: \(stalling.sessions)")
        XCTAssertEqual(try CLI.pictTypes(after.0).first, "I", "b's new session starts on a keyframe")
        XCTAssertEqual(try decodeErrors(after.0), "")
        let bSpan = (after.1.last ?? 0) - (after.1.first ?? 0)
        XCTAssertEqual(bSpan, Double(Self.seconds) - resumedAt, accuracy: 4, "b records from its return to the end")
        XCTAssertEqual(after.1.count, Int(bSpan * 30) + 1, "b's new session is whole")

        // The refusing destination: published once it was there, from then to the end.
        let aSession = try XCTUnwrap(late.sessions.last, "a recorded nothing")
        let aTimes = try CLI.videoFrameTimes(aSession)
        XCTAssertGreaterThan(aTimes.count, (Self.seconds - 14) * 30, "a published from its appearance on")
        XCTAssertEqual(try decodeErrors(aSession), "")

        // stats named each destination's state as it went.
        func states(_ name: String) -> [String] {
            stats.compactMap { node($0, name)?["state"] as? String }.reduce(into: []) { if $0.last != $1 { $0.append($1) } }
        }
        print("restream states: a \(states("a")), b \(states("b")), c \(states("c"))")
        XCTAssertEqual(states("a").first, "reconnecting", "a could not connect at first")
        XCTAssertTrue(states("a").contains("sending"))
        XCTAssertEqual(states("b").prefix(3), ["sending", "reconnecting", "sending"], "b: \(states("b"))")
        XCTAssertEqual(states("c").filter { $0 != "ended" }, ["sending"], "c was never disturbed")
        XCTAssertNil(node(try XCTUnwrap(stats.first), "record")?["state"], "a file sink reports no connection")
    }

    func decodeErrors(_ path: String) throws -> String { try RecordingSafetyTests.decodeErrors(path) }
}
