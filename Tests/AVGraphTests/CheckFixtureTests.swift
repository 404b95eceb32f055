import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// Each broken fixture marks where its diagnostics must land, in the file itself:
/// a comment line with a caret under the column of the line above, then the severity and the
/// words the message (or its hint) must contain, separated by `|`:
///
///     video: {type: h264, in: screen, bitrat: 2500k}
///   #                                 ^ error: unknown option 'bitrat' | did you mean 'bitrate'?
///
/// `# @LINE:COL severity: words` marks a place that has no line above it.
/// The checker must report exactly the marked errors: no fewer, no more.
final class CheckFixtureTests: XCTestCase {
    struct Expectation {
        var line: Int
        var column: Int
        var severity: String
        var words: [String]
    }

    static let fixtures: String = {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        return here.appendingPathComponent("Fixtures/broken").path
    }()

    static func expectations(in text: String) -> [Expectation] {
        var result: [Expectation] = []
        var lastContentLine = 0
        for (i, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("# @") {
                let rest = trimmed.dropFirst(3)
                let pos = rest.prefix { $0 != " " }.split(separator: ":")
                if let e = parse(body: String(rest.drop { $0 != " " })), pos.count == 2, let l = Int(pos[0]), let c = Int(pos[1]) {
                    result.append(Expectation(line: l, column: c, severity: e.0, words: e.1))
                }
                continue
            }
            if line.hasPrefix("#"), let caret = line.firstIndex(of: "^"),
               line[line.index(after: line.startIndex)..<caret].allSatisfy({ $0 == " " }) {
                let column = line.distance(from: line.startIndex, to: caret) + 1
                if let e = parse(body: String(line[line.index(after: caret)...])) {
                    result.append(Expectation(line: lastContentLine, column: column, severity: e.0, words: e.1))
                }
                continue
            }
            lastContentLine = i + 1
        }
        return result
    }

    static func parse(body: String) -> (String, [String])? {
        let t = body.trimmingCharacters(in: .whitespaces)
        guard let colon = t.firstIndex(of: ":") else { return nil }
        let severity = String(t[..<colon])
        let words = t[t.index(after: colon)...].split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return (severity, words)
    }

    func testEveryBrokenFixtureGivesExactlyItsMarkedDiagnostics() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures).filter { $0.hasSuffix(".pipe") }.sorted()
        XCTAssertGreaterThanOrEqual(files.count, 25, "at least 25 broken fixtures")
        let checker = Checker(registry: TestSupport.freshRegistry())
        for name in files {
            let path = Self.fixtures + "/" + name
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let expected = Self.expectations(in: text)
            XCTAssertFalse(expected.isEmpty, "\(name) marks no expected diagnostic")
            let result = checker.check(path: path, displayName: name)
            XCTAssertFalse(result.isValid, "\(name) should be invalid")
            let errors = result.diagnostics.filter { $0.severity == .error }
            let shown = result.diagnostics.map(\.description).joined(separator: "\n")
            XCTAssertEqual(errors.count, expected.filter { $0.severity == "error" }.count, "\(name): error count; got:\n\(shown)")
            for e in expected {
                let match = result.diagnostics.first { d in
                    d.location.line == e.line && d.location.column == e.column && d.severity.rawValue == e.severity
                }
                guard let match else {
                    XCTFail("\(name): no \(e.severity) at \(e.line):\(e.column); got:\n\(shown)")
                    continue
                }
                let said = match.message + " " + (match.hint ?? "")
                for w in e.words where !said.contains(w) {
                    XCTFail("\(name):\(e.line):\(e.column): '\(w)' not in: \(said)")
                }
            }
        }
    }

    func testThreeIndependentMistakesGiveThreeDiagnosticsInOneRun() {
        let result = Checker(registry: TestSupport.freshRegistry()).check(path: Self.fixtures + "/35-three-mistakes.pipe")
        XCTAssertEqual(result.diagnostics.filter { $0.severity == .error }.count, 3)
        XCTAssertEqual(Set(result.diagnostics.map(\.location.line)).count, 3)
    }

    /// A node with several outputs feeding an input that takes either kind is ambiguous;
    /// one whose kinds pick a single output is not.
    func testAmbiguousUpstreamNeedsAPad() throws {
        let dir = TestSupport.scratch()
        try TestSupport.shell(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=10", "-f", "lavfi",
                               "-i", "sine", "-t", "1", "-c:v", "libx264", "-c:a", "aac", dir + "/in.mp4"])
        let ambiguous = TestSupport.check("""
        nodes:
          src:  {type: file, path: in.mp4}
          sink: {type: null, in: [src]}
        """, in: dir)
        let d = try XCTUnwrap(ambiguous.diagnostics.first { $0.severity == .error })
        XCTAssertEqual([d.location.line, d.location.column], [3, 27])
        XCTAssertTrue(d.message.contains("several outputs"), d.message)
        XCTAssertTrue(d.hint?.contains("'src.video'") ?? false)
        let byKind = TestSupport.check("""
        nodes:
          src:   {type: file, path: in.mp4}
          video: {type: h264, in: src}
          sink:  {type: null, in: [video, src.audio]}
        """, in: dir, name: "bykind")
        XCTAssertTrue(byKind.isValid, byKind.diagnostics.description)
    }

    func testExampleFixturesInPipelinesAreValid() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("pipelines").path
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".pipe") }
        XCTAssertFalse(files.isEmpty)
        for f in files {
            let r = Checker(registry: TestSupport.freshRegistry()).check(path: dir + "/" + f)
            XCTAssertTrue(r.isValid, "\(f):\n" + r.diagnostics.map(\.description).joined(separator: "\n"))
        }
    }
}
