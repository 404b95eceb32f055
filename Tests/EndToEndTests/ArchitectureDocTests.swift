import AVGraphTesting
import Foundation
import XCTest

/// docs/ARCHITECTURE.md's module graph is Package.swift's (scripts/architecture makes it from
/// `swift package dump-package`), and no module imports a module it does not depend on.
final class ArchitectureDocTests: XCTestCase {
    func testTheModuleGraphPageMatchesPackageSwiftAndNoModuleImportsAnotherUndeclared() throws {
        let result = try Tool.run([CLI.packageRoot + "/scripts/architecture", "--check"])
        XCTAssertEqual(result.status, 0, "scripts/architecture --check:\n\(result.stderr)")
        let page = try String(contentsOfFile: CLI.packageRoot + "/docs/ARCHITECTURE.md", encoding: .utf8)
        for module in ["AVGraph", "AVGraphNodes", "AVGraphHTTP", "avgraph"] {
            XCTAssertTrue(page.contains("| `\(module)` |"), "the page lists \(module)")
        }
    }
}
