import Foundation
import XCTest

/// What the compiler says about a node author's hooks: small node types compiled with swiftc
/// against the AVGraph module this build made, as a plugin author's code is. A hook of another
/// role, or a misspelled one, must not compile; the same types spelled right must.
final class HookContractTests: XCTestCase {
    static let header = """
        import AVGraph
        func formats(_ n: Negotiation) -> [StreamFormat] { n.inputs.map(\\.format) }

        """

    /// One node type of `role` with `hook` as its only member besides the contract.
    static func node(_ name: String, _ role: String, _ hook: String) -> String {
        let pads = role == "Source" ? "static let outputs = [PadSpec(\"out\", [.rawVideo])]"
            : role == "Sink" ? "static let inputs = [PadSpec(\"in\", [.rawVideo])]"
            : "static let inputs = [PadSpec(\"in\", [.rawVideo])]; static let outputs = [PadSpec(\"out\", [.rawVideo])]"
        return """
            final class \(name): \(role), Node, @unchecked Sendable {
                static let typeName = "\(name.lowercased())"; static let summary = ""; static let options: [OptionSpec] = []
                \(pads)
                static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { formats(n) }
                init(_ setup: NodeSetup) throws {}
                \(hook)
            }

            """
    }

    /// Type-checks `source`; the compiler's exit status and its diagnostics.
    func typecheck(_ source: String) throws -> (status: Int32, diagnostics: String) {
        let swiftc = ["/opt/swift/usr/bin/swiftc", "/usr/bin/swiftc"].first { FileManager.default.isExecutableFile(atPath: $0) }
            ?? (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/swiftc" }
                .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let swiftc else { throw XCTSkip("no swiftc on this machine") }
        let modules = Plugins.buildDirectory + "/Modules"
        guard FileManager.default.fileExists(atPath: modules + "/AVGraph.swiftmodule") else { throw XCTSkip("\(modules) has no AVGraph module") }
        let file = Plugins.scratch() + "/Hooks.swift"
        try source.write(toFile: file, atomically: true, encoding: .utf8)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: swiftc)
        // The C modules AVGraph's interface names: FFmpeg's, its pixel kernels' (the map SwiftPM
        // writes for a C target) and the YAML parser's (from the package checkouts).
        let checkouts = Plugins.packageRoot + "/.build/checkouts"
        let cModules = ["\(Plugins.packageRoot)/Sources/CFFmpeg/module.modulemap", Plugins.buildDirectory + "/CKernels.build/module.modulemap"]
            + (FileManager.default.enumerator(atPath: checkouts)?.compactMap { $0 as? String }
                .filter { $0.hasSuffix("/module.modulemap") && !$0.contains("/Tests/") }.map { checkouts + "/" + $0 } ?? [])
        p.arguments = ["-typecheck", "-swift-version", "6", "-I", modules] + cModules.flatMap { ["-Xcc", "-fmodule-map-file=\($0)"] } + [file]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = err
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationStatus, text)
    }

    /// Lines of `file` the compiler reported an error on.
    func errorLines(_ diagnostics: String) -> Set<Int> {
        Set(diagnostics.split(separator: "\n").compactMap { line -> Int? in
            let parts = line.split(separator: ":")
            guard parts.count > 3, parts[0].hasSuffix("Hooks.swift"), line.contains(": error:") else { return nil }
            return Int(parts[1])
        })
    }

    func testEveryRoleCompilesWithItsOwnHooksSpelledRight() throws {
        let source = Self.header
            + Self.node("GoodSource", "Source", """
                override func produce(_ out: Outlet) throws -> Bool { false }
                override func finish(_ out: Outlet) throws {}
                override func abort() {}
                """)
            + Self.node("GoodFilter", "Filter", """
                override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {}
                override func wantsInput(_ input: Int) -> Bool { true }
                override func tick(_ out: Outlet) throws {}
                override func inputEnded(_ input: Int, _ out: Outlet) throws {}
                override func set(option: String, to value: OptionValue) throws {}
                """)
            + Self.node("GoodSink", "Sink", """
                override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {}
                override func inputEnded(_ input: Int, _ out: Outlet) throws {}
                override func finish(_ out: Outlet) throws {}
                """)
        let result = try typecheck(source)
        XCTAssertEqual(result.status, 0, result.diagnostics)
    }

    func testAHookOfAnotherRoleOrAMisspelledHookDoesNotCompile() throws {
        let cases: [(role: String, hook: String, why: String)] = [
            ("Filter", "override func recieve(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {}", "does not override"),
            ("Filter", "override func tik(_ out: Outlet) throws {}", "does not override"),
            ("Sink", "override func finsh(_ out: Outlet) throws {}", "does not override"),
            ("Source", "override func produce(out: Outlet) throws -> Bool { false }", "do not match"),
            ("Filter", "func produce(_ out: Outlet) throws -> Bool { true }", "requires an 'override' keyword"),
            ("Sink", "override func produce(_ out: Outlet) throws -> Bool { true }", "'final'"),
            ("Sink", "func wantsInput(_ input: Int) -> Bool { false }", "requires an 'override' keyword"),
            ("Source", "func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {}", "requires an 'override' keyword"),
            ("Source", "override func tick(_ out: Outlet) throws {}", "'final'"),
            ("Source", "func inputEnded(_ input: Int, _ out: Outlet) throws {}", "requires an 'override' keyword"),
            ("Filter", "func finish(_ out: Outlet) throws {}", "requires an 'override' keyword"),
        ]
        var source = Self.header
        var hookLines: [Int] = []
        for (i, c) in cases.enumerated() {
            let node = Self.node("Bad\(i)", c.role, c.hook)
            let offset = node.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains(c.hook) }!
            hookLines.append(source.split(separator: "\n", omittingEmptySubsequences: false).count + offset)
            source += node
        }
        let result = try typecheck(source)
        XCTAssertNotEqual(result.status, 0, "compiled:\n\(source)")
        let failed = errorLines(result.diagnostics)
        let lines = result.diagnostics.split(separator: "\n")
        for (i, c) in cases.enumerated() {
            XCTAssertTrue(failed.contains(hookLines[i]), "\(c.role) with `\(c.hook)` compiled:\n\(result.diagnostics)")
            XCTAssertTrue(lines.contains { $0.contains("Hooks.swift:\(hookLines[i]):") && $0.contains(c.why) },
                          "\(c.role) with `\(c.hook)`: expected \(c.why):\n\(result.diagnostics)")
        }
        XCTAssertEqual(failed, Set(hookLines), "errors elsewhere than the hooks:\n\(result.diagnostics)")
    }
}
