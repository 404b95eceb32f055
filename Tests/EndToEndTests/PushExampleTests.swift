import Foundation
import XCTest

/// Examples/PushExample, the phone path through the Swift API (zero-copy NV12 pushes of a
/// 1170x2532 screen, app audio and a microphone), to a file and live to a real RTMP server on
/// loopback: both recordings decoded by ffprobe. Memory is bench/run's business (P1), not a test's.
final class PushExampleTests: XCTestCase {
    static let seconds = 4.0

    /// The PushExample binary of the same build as avgraph.
    static var binary: String { (CLI.binary as NSString).deletingLastPathComponent + "/PushExample" }

    func run(_ output: String) throws -> CLI.Result {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw NSError(domain: "PushExampleTests", code: 1, userInfo: [NSLocalizedDescriptionKey: "no \(Self.binary): swift build -c release"])
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = [output, "--size", "1170x2532", "--seconds", String(Self.seconds)]
        let out = Pipe()
        let errPath = CLI.scratch() + "/stderr"
        XCTAssertTrue(FileManager.default.createFile(atPath: errPath, contents: nil))
        let err = try XCTUnwrap(FileHandle(forWritingAtPath: errPath))
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        try err.close()
        return CLI.Result(status: p.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                          stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }

    /// What the example says it did: pictures taken and the peak of its private memory.
    func checkReport(_ r: CLI.Result, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(r.status, 0, r.stderr, file: file, line: line)
        XCTAssertTrue(r.stdout.contains(" taken"), r.stdout, file: file, line: line)
        XCTAssertNotNil(r.stdout.range(of: #"peak RssAnon [0-9.]+ MB \(private, sampled every 20 ms"#, options: .regularExpression),
                        r.stdout, file: file, line: line)
        XCTAssertTrue(r.stdout.contains("zero-copy push"), r.stdout, file: file, line: line)
    }

    /// 1280x720 H.264 and AAC, as long as what was pushed, nearly every picture there.
    func checkRecording(_ path: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let probe = try CLI.probe(path, ["-count_packets"])
        let v = try XCTUnwrap(CLI.stream(probe, "video"), "no video in \(path)", file: file, line: line)
        XCTAssertEqual(v["codec_name"] as? String, "h264", file: file, line: line)
        XCTAssertEqual(v["width"] as? Int, 1280, file: file, line: line)
        XCTAssertEqual(v["height"] as? Int, 720, file: file, line: line)
        let packets = Int(v["nb_read_packets"] as? String ?? "") ?? 0
        XCTAssertGreaterThanOrEqual(Double(packets), 0.9 * Self.seconds * 30, "video frames", file: file, line: line)
        XCTAssertLessThanOrEqual(Double(packets), Self.seconds * 30 + 2, "video frames", file: file, line: line)
        let a = try XCTUnwrap(CLI.stream(probe, "audio"), "no audio in \(path)", file: file, line: line)
        XCTAssertEqual(a["codec_name"] as? String, "aac", file: file, line: line)
        let duration = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        XCTAssertEqual(duration, Self.seconds, accuracy: 0.5, "recording length", file: file, line: line)
    }

    func testPushesToAFile() throws {
        let out = CLI.scratch() + "/push.mp4"
        let r = try run(out)
        checkReport(r)
        XCTAssertTrue(r.stdout.contains("wrote \(out)"), r.stdout)
        try checkRecording(out)
    }

    func testPushesLiveToAnRtmpServer() throws {
        try XCTSkipUnless(NginxRtmp.isAvailable, "nginx with libnginx-mod-rtmp is not installed (scripts/setup)")
        let nginx = try NginxRtmp()
        defer { nginx.stop() }
        let r = try run(nginx.url("phone"))
        checkReport(r)
        // nginx closes the recording when the session ends; the example has ended it.
        var sessions: [String] = []
        for _ in 0..<50 where sessions.isEmpty {
            sessions = nginx.sessions
            usleep(100_000)
        }
        XCTAssertEqual(sessions.count, 1, "one publish session")
        try checkRecording(try XCTUnwrap(sessions.first))
    }

    func testRefusesAnOutputItCannotSendTo() throws {
        let r = try run("http://127.0.0.1:1/phone")
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("OUTPUT is a file path, an rtmp:// or an srt:// URL"), r.stderr)
    }
}
