import Foundation
import XCTest

/// `check --format dot` and `--format json`: the graph as Graphviz reads it, every edge with its format.
final class GraphPictureTests: XCTestCase {
    /// Graphviz's own reading of the DOT (`dot -Tjson`): edges with their labels.
    static func graphviz(_ dotText: String, format: String = "json") throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["dot", "-T\(format)"]
        let input = Pipe(), out = Pipe()
        p.standardInput = input
        p.standardOutput = out
        try p.run()
        input.fileHandleForWriting.write(Data(dotText.utf8))
        try input.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, "dot refused the graph")
        return data
    }

    static func labelledEdges(_ dotText: String) throws -> [(from: String, to: String, label: String)] {
        let json = try JSONSerialization.jsonObject(with: try graphviz(dotText)) as? [String: Any] ?? [:]
        let objects = json["objects"] as? [[String: Any]] ?? []
        return (json["edges"] as? [[String: Any]] ?? []).map { e in
            (objects[e["tail"] as? Int ?? 0]["name"] as? String ?? "", objects[e["head"] as? Int ?? 0]["name"] as? String ?? "",
             (e["label"] as? String ?? "").replacingOccurrences(of: "\\n", with: "\n"))
        }
    }

    func testLivePipeRendersWithEveryEdgeCarryingItsFormat() throws {
        let r = try CLI.run(["check", "--format", "dot", "pipelines/live.pipe"], cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stderr)
        let svg = String(decoding: try Self.graphviz(r.stdout, format: "svg"), as: UTF8.self)
        XCTAssertTrue(svg.contains("<svg"), "dot -Tsvg made no SVG")

        let edges = try Self.labelledEdges(r.stdout)
        // live.pipe's thirteen connections, each with the format check negotiated for it.
        XCTAssertEqual(edges.count, 13, "\(edges)")
        let pattern = try NSRegularExpression(pattern:
            #"^(\d+x\d+ \w+ \d+/\d+ (upright|tagged)( size varies)?|\d+ Hz (mono|stereo) \w+|h264 High \d+x\d+ [\d.]+ Mbit/s|aac LC \d+ kbit/s \d+ Hz (mono|stereo))$"#)
        for e in edges {
            let first = e.label.split(separator: "\n").first.map(String.init) ?? ""
            XCTAssertEqual(pattern.numberOfMatches(in: first, range: NSRange(first.startIndex..., in: first)), 1,
                           "edge \(e.from) -> \(e.to) has no format: '\(e.label)'")
        }
        func label(_ from: String, _ to: String) -> String? { edges.first { $0.from == from && $0.to == to }?.label }
        XCTAssertEqual(label("screen", "upright"), "1170x2532 nv12 30/1 tagged")
        XCTAssertEqual(label("fit", "privacy"), "1280x720 yuv420p 30/1 upright")
        XCTAssertEqual(label("mix", "program"), "44100 Hz stereo fltp")
        XCTAssertEqual(label("mic", "mix"), "48000 Hz mono s16")
        XCTAssertEqual(label("video", "out"), "h264 High 1280x720 2.5 Mbit/s")
        XCTAssertEqual(label("audio", "out"), "aac LC 128 kbit/s 44100 Hz stereo")
    }

    func testPluginNodesAreMarked() throws {
        // check loads the plugins a file names only when told to (they run code).
        let r = try CLI.run(["check", "--allow-plugins", "--format", "dot", "Plugins/demo.pipe"], cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains(##"\n[plugin libAVGraphWatermark.so]", fillcolor="#fde9c9", style="rounded,filled,dashed""##), r.stdout)
        XCTAssertTrue(r.stdout.contains("[plugin libAVGraphDucker.so]"), r.stdout)
        XCTAssertFalse(r.stdout.contains("[plugin built-in]"))
        let edges = try Self.labelledEdges(r.stdout)
        XCTAssertTrue(edges.contains { $0.from == "mark" && $0.to == "video" && $0.label == "1280x720 yuv420p 30/1 upright" }, "\(edges)")
    }

    /// A broken file gives no picture: its errors go to stderr and the status is 1.
    func testInvalidFileGivesErrorsNotAPicture() throws {
        let dir = CLI.scratch()
        CLI.write("nodes:\n  screen: {type: testsrc, size: 320x240}\n  video: {type: h264, in: screen, bitrat: 1M}\n", to: dir + "/bad.pipe")
        let r = try CLI.run(["check", "--format", "dot", dir + "/bad.pipe"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, "")
        XCTAssertTrue(r.stderr.contains("bad.pipe:3:35: error: unknown option 'bitrat'"), r.stderr)
    }

    func testJSONListsEdgesWithFormats() throws {
        let r = try CLI.run(["check", "--format", "json", "pipelines/record.pipe"], cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let edges = ((json?["files"] as? [[String: Any]])?.first?["edges"] as? [[String: Any]]) ?? []
        let shown = edges.map { "\($0["from"]!).\($0["from_pad"]!) -> \($0["to"]!).\($0["to_pad"]!): \($0["format"]!)" }
        XCTAssertEqual(shown.sorted(), [
            "audio.audio -> out.in: aac LC 128 kbit/s 44100 Hz mono",
            "fit.video -> video.in: 1280x720 yuv420p 30/1 upright",
            "src.audio -> audio.in: 44100 Hz mono fltp",
            "src.video -> fit.video: 640x360 yuv420p 30/1 upright",
            "video.out -> out.in: h264 High 1280x720 2.5 Mbit/s",
        ])
    }
}
