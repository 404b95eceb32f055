import AVGraph
import Foundation
import XCTest

/// A plugin (Tests/PluginFixtures/Declares) brings an event kind (`beat`) and an option value type
/// (`Cadence`, `{every: N, label: WORD}`) the runtime has never heard of: `inspect` and both
/// schemas list them, `check` reports a bad cadence at its place in the file, and a run writes the
/// beats as event lines the generated schema accepts.
extension PluginTests {
    static var declares: String { get throws { try Plugins.library("FixtureDeclares") } }

    func testAPluginsEventKindAndOptionTypeAreInInspectAndBothSchemas() throws {
        let plugin = try Self.declares
        let pipeSchema = try Self.json(try avgraph(["inspect", "--schema", "--plugin", plugin]).out)
        let cadence = try XCTUnwrap(pipeSchema["definitions", "type-cadence-filter"] as? [String: Any])
        let option = try XCTUnwrap(cadence["properties", "cadence"] as? [String: Any])
        XCTAssertEqual(option["required"] as? [String], ["every"], "\(option)")
        XCTAssertEqual(option["properties", "every", "minimum"] as? Int, 1, "\(option)")
        XCTAssertEqual(option["default", "every"] as? Int, 10, "the default, as JSON: \(option)")
        XCTAssertEqual(option["default", "label"] as? String, "beat")
        XCTAssertTrue((cadence["description"] as? String ?? "").contains("(events: beat)"), "\(cadence)")

        let eventSchema = try Self.json(try avgraph(["inspect", "--events-schema", "--plugin", plugin]).out)
        let names = try XCTUnwrap(eventSchema["properties", "event", "enum"] as? [String])
        XCTAssertTrue(names.contains("beat") && names.contains("level") && names.contains("start"), "\(names)")
        let beat = try XCTUnwrap(eventSchema["$defs", "beat"] as? [String: Any])
        XCTAssertEqual(beat["required"] as? [String], ["event", "wall", "node", "picture", "media_time", "label"])
        XCTAssertTrue((beat["description"] as? String ?? "").contains("(`cadence`)"), "\(beat)")
        let without = try Self.json(try avgraph(["inspect", "--events-schema"]).out)
        XCTAssertFalse((without["properties", "event", "enum"] as? [String] ?? []).contains("beat"))

        let detail = try avgraph(["inspect", "cadence", "--plugin", plugin]).out
        XCTAssertTrue(detail.contains("cadence  [type: {every: N, label: WORD}; default: {every: 10, label: beat}]"), detail)
        XCTAssertTrue(detail.contains("beat  [picture, media_time, label]"), detail)
    }

    /// 30 pictures with a beat every 7th: four beats, at pictures 7, 14, 21, 28 and their media
    /// times; every line of the run validates against the schema generated with the plugin.
    func testARunWritesThePluginsEventsAndTheGeneratedSchemaAcceptsThem() throws {
        let plugin = try Self.declares
        let dir = Plugins.scratch()
        try """
        plugins: [\(plugin)]
        nodes:
          src:   {type: testsrc, size: 64x64, rate: 30, duration: 1s}
          beats: {type: cadence, in: src, cadence: {every: 7, label: tock}}
          out:   {type: null, in: beats}
        """.write(toFile: dir + "/beats.pipe", atomically: true, encoding: .utf8)
        let run = try avgraph(["run", dir + "/beats.pipe", "--events", "json"]).out
        let events = run.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let beats = events.filter { $0["event"] as? String == "beat" }
        XCTAssertEqual(beats.compactMap { $0["picture"] as? Int }, [7, 14, 21, 28], run)
        XCTAssertEqual(beats.compactMap { $0["label"] as? String }, Array(repeating: "tock", count: 4))
        XCTAssertEqual(beats.compactMap { $0["node"] as? String }, Array(repeating: "beats", count: 4))
        for (beat, picture) in zip(beats, [7, 14, 21, 28]) {
            XCTAssertEqual(beat["media_time"] as? Double ?? -1, Double(picture - 1) / 30, accuracy: 0.001, "\(beat)")
        }
        XCTAssertEqual(events.first { $0["event"] as? String == "null" }?["counts"] as? [Int], [30], "the pictures all went through")

        let schema = dir + "/events.schema.json"
        try avgraph(["inspect", "--events-schema", "--plugin", plugin]).out.write(toFile: schema, atomically: true, encoding: .utf8)
        let v = try Self.validate(run, schema: schema)
        XCTAssertEqual(v.status, 0, v.report)
        XCTAssertTrue(v.report.contains("\(events.count) valid, 0 invalid"), v.report)
        // The built-in schema does not know the plugin's kind: its lines are not avgraph's.
        let plain = try Self.validate(run, schema: Plugins.packageRoot + "/docs/events.schema.json")
        XCTAssertEqual(plain.status, 1)
        XCTAssertTrue(plain.report.contains("\(events.count - 4) valid, 4 invalid"), plain.report)
    }

    /// The plugin's parser says where in the file a cadence is wrong, as a built-in type's does.
    func testABadCadenceIsAnErrorAtItsPlaceInTheFile() throws {
        let plugin = try Self.declares
        let dir = Plugins.scratch()
        try """
        nodes:
          src:   {type: testsrc, size: 64x64, duration: 1s}
          beats: {type: cadence, in: src, cadence: {every: 0}}
          late:  {type: cadence, in: beats, cadence: {evry: 3}}
          out:   {type: null, in: late}
        """.write(toFile: dir + "/bad.pipe", atomically: true, encoding: .utf8)
        let r = try avgraph(["check", "--plugin", plugin, dir + "/bad.pipe"], expect: 1).out
        XCTAssertTrue(r.contains("bad.pipe:3:52: error: option 'cadence' of 'beats': every is a count of pictures from 1, got '0'"), r)
        XCTAssertTrue(r.contains("bad.pipe:4:47: error: option 'cadence' of 'late': unknown key 'evry'"), r)
    }

    static func json(_ text: String) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// scripts/validate-events (python's jsonschema) over `lines` against `schema`.
    static func validate(_ lines: String, schema: String) throws -> (status: Int32, report: String) {
        let input = Plugins.scratch() + "/events.jsonl"
        try lines.write(toFile: input, atomically: true, encoding: .utf8)
        let validator = Process()
        validator.executableURL = URL(fileURLWithPath: Plugins.packageRoot + "/scripts/validate-events")
        validator.arguments = [schema]
        validator.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: input))
        let report = Pipe()
        validator.standardOutput = report
        validator.standardError = report
        try validator.run()
        let text = String(decoding: report.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        validator.waitUntilExit()
        return (validator.terminationStatus, text)
    }
}

extension Dictionary where Key == String, Value == Any {
    /// A value inside nested objects, by key path.
    subscript(_ keys: String...) -> Any? {
        keys.reduce(self as Any?) { ($0 as? [String: Any])?[$1] }
    }
}
