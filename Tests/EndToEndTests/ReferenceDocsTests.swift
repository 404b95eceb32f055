import Foundation
import XCTest

/// The reference pages a clone ships must say what the code does.
final class ReferenceDocsTests: XCTestCase {
    /// docs/NODES.md is `avgraph inspect --format markdown` of the built-in node set, byte for byte.
    func testNodeReferenceIsGeneratedFromTheCode() throws {
        let generated = try CLI.builtInOutput(["inspect", "--format", "markdown"])
        let committed = try Data(contentsOf: URL(fileURLWithPath: CLI.packageRoot + "/docs/NODES.md"))
        XCTAssertTrue(generated.count > 1000, "the generated reference is suspiciously short")
        XCTAssertEqual(String(decoding: committed, as: UTF8.self), String(decoding: generated, as: UTF8.self),
                       "docs/NODES.md is stale: run `.build/release/avgraph inspect --format markdown > docs/NODES.md`")
    }

    /// Every built-in type and every one of its options appears in the page (the generator cannot skip one).
    func testNodeReferenceNamesEveryTypeAndOption() throws {
        let list = try CLI.run(["inspect"])
        let page = try String(contentsOfFile: CLI.packageRoot + "/docs/NODES.md", encoding: .utf8)
        let types = list.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        XCTAssertGreaterThan(types.count, 15)
        for t in Set(types) {
            XCTAssertTrue(page.contains("## `\(t)` ("), "NODES.md lacks \(t)")
            let described = try CLI.run(["inspect", t])
            for line in described.stdout.split(separator: "\n") where line.hasPrefix("  ") && line.contains("  [type: ") {
                let option = line.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init) ?? ""
                XCTAssertTrue(page.contains("| `\(option)` |"), "NODES.md lacks \(t).\(option)")
            }
        }
    }

    /// README and docs link only to pages a clone has.
    func testDocsLinkOnlyToPagesInTheRepo() throws {
        let root = CLI.packageRoot
        let pages = ["README.md"] + (try FileManager.default.contentsOfDirectory(atPath: root + "/docs")
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 })
        let link = try NSRegularExpression(pattern: #"\]\(([^)#]+)(#[^)]*)?\)"#)
        for page in pages {
            let text = try String(contentsOfFile: root + "/" + page, encoding: .utf8)
            XCTAssertFalse(text.contains("shared notes"), "\(page) points outside the repo")
            for m in link.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let target = String(text[Range(m.range(at: 1), in: text)!])
                if target.contains("://") { continue }
                let base = (page as NSString).deletingLastPathComponent
                let path = ((root + "/" + base) as NSString).appendingPathComponent(target)
                XCTAssertTrue(FileManager.default.fileExists(atPath: path), "\(page) links to missing \(target)")
            }
        }
    }
}
