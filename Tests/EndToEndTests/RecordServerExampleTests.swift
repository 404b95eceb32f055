import Foundation
import XCTest

/// Examples/RecordServer, the async API in a server: two requests start two pipelines, SIGTERM
/// stops both and the server exits once both files are finalized (ffprobe reads them whole).
final class RecordServerExampleTests: XCTestCase {
    /// The RecordServer binary of the same build as avgraph.
    static var binary: String { (CLI.binary as NSString).deletingLastPathComponent + "/RecordServer" }

    func testTwoRequestsTwoRecordingsBothFinalizedOnSigterm() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw NSError(domain: "RecordServerExampleTests", code: 1, userInfo: [NSLocalizedDescriptionKey: "no \(Self.binary): swift build -c release"])
        }
        let dir = CLI.scratch()
        CLI.write("""
        realtime: true
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30}
          sound:  {type: tone, freq: 440}
          video:  {type: h264, in: screen, bitrate: 500k}
          audio:  {type: aac, in: sound}
          out:    {type: file, in: [video, audio], path: unused.mp4}
        """, to: dir + "/record.pipe")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.binary)
        p.arguments = [dir + "/record.pipe", dir, "--port", "0"]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        let outData = CLI.DataBox(), errData = CLI.DataBox()
        out.fileHandleForReading.readabilityHandler = { h in outData.append(h.availableData) }
        err.fileHandleForReading.readabilityHandler = { h in errData.append(h.availableData) }
        try p.run()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }

        var port: String?
        for _ in 0..<200 where port == nil {
            usleep(50_000)
            port = outData.string.firstMatch(of: /listening on 127\.0\.0\.1:(\d+)/).map { String($0.1) }
        }
        let url = "http://127.0.0.1:\(try XCTUnwrap(port, "no 'listening on' line: \(outData.string) \(errData.string)"))"
        func post(_ path: String) throws -> String {
            try CLI.shell(["curl", "-s", "-X", "POST", "-w", " %{http_code}", url + path])
        }
        XCTAssertEqual(try post("/recordings/first"), "recording \(dir)/first.mp4\n 202")
        usleep(1_000_000)
        XCTAssertEqual(try post("/recordings/second"), "recording \(dir)/second.mp4\n 202")
        XCTAssertEqual(try post("/recordings/second"), "second is recording already\n 409")
        XCTAssertEqual(try post("/recordings/../x"), "POST /recordings/NAME\n 404")
        usleep(2_000_000)

        kill(p.processIdentifier, SIGTERM)
        let start = Date()
        while p.isRunning && Date().timeIntervalSince(start) < 20 { usleep(20_000) }
        XCTAssertFalse(p.isRunning, "shut down within 20 s of SIGTERM")
        p.waitUntilExit()
        out.fileHandleForReading.readabilityHandler = nil
        outData.append(out.fileHandleForReading.readDataToEndOfFile())
        XCTAssertEqual(p.terminationStatus, 0, errData.string)
        let lines = outData.string.split(separator: "\n").map(String.init)
        XCTAssertEqual(Set(lines.filter { $0.hasPrefix("finalized ") }), ["finalized \(dir)/first.mp4", "finalized \(dir)/second.mp4"])
        XCTAssertEqual(lines.last, "shut down")

        // Recorded about 3 s and 2 s: each whole, video and audio, every picture there.
        for (name, seconds) in [("first", 3.0), ("second", 2.0)] {
            let path = "\(dir)/\(name).mp4"
            let probe = try CLI.probe(path, ["-count_packets"])
            let v = try XCTUnwrap(CLI.stream(probe, "video"), "no video in \(path)")
            XCTAssertEqual(v["codec_name"] as? String, "h264")
            XCTAssertEqual(CLI.stream(probe, "audio")?["codec_name"] as? String, "aac", path)
            let duration = Double((probe["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
            XCTAssertEqual(duration, seconds, accuracy: 0.8, path)
            let packets = Double(v["nb_read_packets"] as? String ?? "") ?? 0
            XCTAssertEqual(packets, Double(v["duration"] as? String ?? "").map { $0 * 30 } ?? -1, accuracy: 3, path)
        }
    }
}
