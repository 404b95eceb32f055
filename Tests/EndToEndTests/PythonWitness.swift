import Foundation
import XCTest

/// Runs a Python script with real third-party validators and parsers (jsonschema, PyYAML,
/// prometheus_client: `scripts/setup` installs them) as an independent witness of what avgraph wrote.
enum PythonWitness {
    /// Runs `script` with `args`; stdout parsed as one JSON value. A missing module fails the test
    /// with the fix, rather than passing for want of a witness.
    static func run(_ script: String, _ args: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> Any? {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", script] + args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        let errData = CLI.DataBox()
        err.fileHandleForReading.readabilityHandler = { h in errData.append(h.availableData) }
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        err.fileHandleForReading.readabilityHandler = nil
        errData.append(err.fileHandleForReading.readDataToEndOfFile())
        if errData.string.contains("ModuleNotFoundError") {
            XCTFail("python3 lacks a module (run scripts/setup): \(errData.string)", file: file, line: line)
            return nil
        }
        XCTAssertEqual(p.terminationStatus, 0, "python3 failed: \(errData.string)", file: file, line: line)
        return try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
    }
}

extension CLI {
    /// Standard output of avgraph with the built-in node set only (AVGRAPH_PLUGIN_PATH unset):
    /// what the generated pages in docs/ are made of.
    static func builtInOutput(_ args: [String], file: StaticString = #filePath, line: UInt = #line) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = args
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "AVGRAPH_PLUGIN_PATH")
        p.environment = env
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, "avgraph \(args) failed", file: file, line: line)
        return data
    }
}
