import Foundation
import XCTest

/// `avgraph inspect --schema`: a JSON Schema an editor can use, checked by a real validator
/// (Python's jsonschema) on YAML loaded by PyYAML.
final class PipeSchemaTests: XCTestCase {
    static func schema(_ extra: [String] = []) throws -> String {
        let r = try CLI.run(["inspect", "--schema"] + extra, cwd: CLI.packageRoot)
        XCTAssertEqual(r.status, 0, r.stderr)
        let path = CLI.scratch() + "/pipe.schema.json"
        CLI.write(r.stdout, to: path)
        return path
    }

    /// For each (schema, file, mutation): the validator's error messages. Mutations: none, a
    /// misspelt option (bitrate -> bitrat on the first node that has one), an unknown node type.
    static let validate = #"""
import json, sys, copy, yaml, jsonschema
out = []
for schema_path, path, mutation in zip(*[iter(sys.argv[1:])] * 3):
    schema = json.load(open(schema_path))
    jsonschema.Draft7Validator.check_schema(schema)
    doc = yaml.safe_load(open(path))
    if mutation == "misspelt":
        node = next(n for n in doc["nodes"].values() if "bitrate" in n)
        node["bitrat"] = node.pop("bitrate")
    elif mutation == "unknown-type":
        next(iter(doc["nodes"].values()))["type"] = "testsrcc"
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]
    out.append({"file": path, "mutation": mutation, "errors": errors})
print(json.dumps(out))
"""#

    func testSchemaValidatesEveryShippedPipelineAndRejectsMistakes() throws {
        let builtIn = try Self.schema()
        let dir = (CLI.binary as NSString).deletingLastPathComponent
        let withPlugins = try Self.schema(["--plugin", dir + "/libAVGraphWatermark.so", "--plugin", dir + "/libAVGraphDucker.so"])
        let pipes = try FileManager.default.contentsOfDirectory(atPath: CLI.packageRoot + "/pipelines").filter { $0.hasSuffix(".pipe") }.sorted()
        XCTAssertGreaterThanOrEqual(pipes.count, 6)
        var args: [String] = []
        for p in pipes { args += [builtIn, CLI.packageRoot + "/pipelines/" + p, "none"] }
        args += [withPlugins, CLI.packageRoot + "/Plugins/demo.pipe", "none"]
        args += [builtIn, CLI.packageRoot + "/pipelines/live.pipe", "misspelt"]
        args += [builtIn, CLI.packageRoot + "/pipelines/live.pipe", "unknown-type"]
        // Without the plugins loaded, the plugin types are unknown to the schema.
        args += [builtIn, CLI.packageRoot + "/Plugins/demo.pipe", "none"]
        let results = try PythonWitness.run(Self.validate, args) as? [[String: Any]] ?? []
        XCTAssertEqual(results.count, pipes.count + 4)
        for r in results.prefix(pipes.count + 1) {
            XCTAssertEqual(r["errors"] as? [String], [], "\(r["file"]!) does not validate")
        }
        let misspelt = results[pipes.count + 1]["errors"] as? [String] ?? []
        XCTAssertTrue(misspelt.contains { $0.contains("'bitrat' was unexpected") }, "\(misspelt)")
        let unknown = results[pipes.count + 2]["errors"] as? [String] ?? []
        XCTAssertTrue(unknown.contains { $0.contains("'testsrcc' is not one of") }, "\(unknown)")
        let noPlugins = results[pipes.count + 3]["errors"] as? [String] ?? []
        XCTAssertTrue(noPlugins.contains { $0.contains("'watermark' is not one of") }, "\(noPlugins)")
    }

    /// Values are checked with their syntax and range, as `check` does.
    func testValuesOutOfSyntaxOrRangeAreRejected() throws {
        let schema = try Self.schema()
        let dir = CLI.scratch()
        let cases = [
            ("good", "nodes:\n  s: {type: testsrc, size: 320x240, rate: 30000/1001}\n  v: {type: h264, in: s, bitrate: 2.5M, profile: main}\n  o: {type: null, in: [v]}\n"),
            ("size", "nodes:\n  s: {type: testsrc, size: 320by240}\n"),
            ("bitrate", "nodes:\n  s: {type: testsrc}\n  v: {type: h264, in: s, bitrate: fast}\n"),
            ("range", "nodes:\n  s: {type: testsrc}\n  v: {type: h264, in: s, bframes: 17}\n"),
            ("choice", "nodes:\n  s: {type: testsrc}\n  v: {type: h264, in: s, profile: extreme}\n"),
            ("top", "pipline: x\nnodes:\n  s: {type: testsrc}\n"),
        ]
        var args: [String] = []
        for (name, text) in cases {
            CLI.write(text, to: "\(dir)/\(name).pipe")
            args += [schema, "\(dir)/\(name).pipe", "none"]
        }
        let results = try PythonWitness.run(Self.validate, args) as? [[String: Any]] ?? []
        XCTAssertEqual(results.count, cases.count)
        for (r, c) in zip(results, cases) {
            let errors = r["errors"] as? [String] ?? ["?"]
            if c.0 == "good" { XCTAssertEqual(errors, [], "a valid file was refused") } else {
                XCTAssertFalse(errors.isEmpty, "\(c.0): the schema took \(c.1)")
            }
        }
        // `check` agrees on the good one.
        XCTAssertEqual(try CLI.run(["check", "\(dir)/good.pipe"]).status, 0)
    }

    /// docs/pipe.schema.json is `avgraph inspect --schema` of the built-in node set, byte for byte.
    func testCommittedSchemaIsFresh() throws {
        let generated = try CLI.builtInOutput(["inspect", "--schema"])
        let committed = try Data(contentsOf: URL(fileURLWithPath: CLI.packageRoot + "/docs/pipe.schema.json"))
        XCTAssertEqual(String(decoding: committed, as: UTF8.self), String(decoding: generated, as: UTF8.self),
                       "docs/pipe.schema.json is stale: run `.build/release/avgraph inspect --schema > docs/pipe.schema.json`")
    }

    /// docs/control.schema.json is `avgraph inspect --control-schema` of the built-in node set, byte for byte.
    func testCommittedControlSchemaIsFresh() throws {
        let generated = try CLI.builtInOutput(["inspect", "--control-schema"])
        let committed = try Data(contentsOf: URL(fileURLWithPath: CLI.packageRoot + "/docs/control.schema.json"))
        XCTAssertEqual(String(decoding: committed, as: UTF8.self), String(decoding: generated, as: UTF8.self),
                       "docs/control.schema.json is stale: run `.build/release/avgraph inspect --control-schema > docs/control.schema.json`")
    }
}
