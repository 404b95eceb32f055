import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// Every option of every registered node type (built-ins and both example plugins) is fed a
/// table of hostile values, as a scalar, inside a list and inside a mapping: each parse returns a
/// value or throws a `ValueProblem` (a trap would end the test process), and a value it returns
/// lies within the declared range and can be used without trapping.
final class OptionParsingPropertyTests: XCTestCase {
    static let hostileScalars: [String] = {
        var v = [
            "", " ", "0", "-0", "-1", "1", "0.0000001", "1e-320", "1e16", "2e16", "9.3e15", "1e308", "1e309", "-1e309",
            "nan", "NaN", "-nan", "inf", "+inf", "-inf", "infinity", "9223372036854775807", "9223372036854775808",
            "-9223372036854775808", "-9223372036854775809", "18446744073709551616", "0x10", "1_000", "٣", "１２",
            "1e16/1", "1/1e16", "9223372036854775807/1", "1/9223372036854775807", "9223372036854775807/9223372036854775806",
            "2147483648/71582789", "4294967296/143165577", "30/0", "0/0", "-30/-1", "1/", "/1", "/", "30/1/1",
            "1e16k", "1e16M", "1e400k", "-1k", "nank", "infM", "k", "M",
            "1e16s", "1e400ms", "1e9h", "1e300h", "-1s", "nans", "infs", "ms", "1e16us",
            "1e16dB", "-1e16dB", "60.0001dB", "infdB", "-infdB", "nandB", "dB", "-1e308dB",
            "1e16MB", "1e16GiB", "-1B", "1e400B", "9223372036854775807B", "GiB",
            "99999999999999999999x1", "1x99999999999999999999", "0x0", "-1x-1", "1e16x1", "x", "xx", "1x1x1", "16385x16384",
            "#", "#12345", "#gggggg", "#+fffff", "#-00000", "#ffffffff", "#ééé",
            "65536,0,1x1", "-1,-1,1x1", "99999999999999999999,0,1x1", ",,", "0,0,0x0",
            "1..2", "..", "1e16s..1e17s", "2s..1s", "-1s..1s",
            "true", "yes", "on", "null", "~", "up", "UP", "left\u{0}", "é", "\u{202e}", "a\nb",
            "{attempts: 99999999999999999999, backoff: 1e16s..1e17s}", "{attempts: -1}", "{backoff: nans}", "{",
            "{a: &a 1, b: *a}", "{attempts: [1]}",
        ]
        v.append(String(repeating: "9", count: 5000))
        v.append(String(repeating: "9", count: 400) + "x" + String(repeating: "9", count: 400))
        v.append("1e" + String(repeating: "9", count: 1000))
        v.append(String(repeating: "é", count: 100_000))
        return v
    }()

    static func shapes(of s: String) -> [PipeValue] {
        let at = SourceLocation(file: "hostile", line: 1, column: 1)
        let scalar = PipeValue.scalar(s, at)
        let entries = ["at", "value", "for", "attempts", "backoff", "mic", s].map { PipeEntry(key: $0, keyLocation: at, value: scalar) }
        return [scalar, .list([scalar], at), .list([.map(entries, at)], at), .map(entries, at), .list([], at), .map([], at)]
    }

    func testEveryOptionOfEveryTypeParsesOrRefusesEveryHostileValue() throws {
        let registry = try Plugins.registry()
        var types: [any Node.Type] = []
        for name in registry.names { types += registry.variants[name] ?? [] }
        XCTAssertTrue(types.contains { $0.typeName == "watermark" } && types.contains { $0.typeName == "ducker" }, "plugins included")
        var parsed = 0, refused = 0
        for type in types {
            for spec in type.options {
                for s in Self.hostileScalars {
                    for value in Self.shapes(of: s) {
                        let result: OptionValue
                        do { result = try spec.type.parse(value) } catch {
                            XCTAssertFalse(error.message.isEmpty)
                            XCTAssertLessThan(error.message.utf8.count, 2000, "a message quotes a long value in full: \(spec.name)")
                            refused += 1
                            continue
                        }
                        parsed += 1
                        XCTAssertTrue(spec.type.admits(result), "\(type.typeName).\(spec.name) = \(PipeValue.quoted(s)) parsed to \(result.text), outside its range")
                        assertUsable(result, "\(type.typeName).\(spec.name) = \(PipeValue.quoted(s))")
                    }
                }
            }
        }
        XCTAssertGreaterThan(parsed, 100)
        XCTAssertGreaterThan(refused, 10_000)
    }

    /// What nodes do with a parsed value must not trap either: a rate becomes an `AVRational`
    /// (32-bit), a duration microseconds in an Int64, a size a picture's bytes.
    func assertUsable(_ v: OptionValue, _ what: String) {
        switch v {
        case .rate(let r):
            XCTAssertTrue(r.num > 0 && r.den > 0 && r.num <= Int(Int32.max) && r.den <= Int(Int32.max), "\(what): \(r)")
            _ = r.av
        case .duration(let d), .number(let d):
            XCTAssertTrue(d.isFinite, what)
            XCTAssertLessThan(abs(d), 1e12, what)
        case .size(let w, let h):
            XCTAssertTrue(w > 0 && h > 0 && w <= 16384 && h <= 16384, what)
        case .declared(let d):
            if let r = d.value as? ScreenRegion { XCTAssertTrue(r.width > 0 && r.height > 0 && r.width <= 16384 && r.height <= 16384, what) }
        case .int(let i):
            XCTAssertLessThan(abs(i), 1 << 50, what)
        case .spans(let spans):
            XCTAssertTrue(spans.allSatisfy { $0.at.isFinite && $0.length.isFinite }, what)
        case .orientationSchedule(let changes):
            XCTAssertTrue(changes.allSatisfy { $0.at.isFinite }, what)
        case .retry(let attempts, let first, let longest):
            XCTAssertTrue(attempts >= 0 && first.isFinite && longest.isFinite && first <= longest, what)
        case .perInput(let m):
            for (_, inner) in m { assertUsable(inner, what) }
        default:
            break
        }
    }

    /// The values that used to trap, through the whole of `check` (the option and `--set`).
    func testRatesBeyondAnyRangeAreLocatedErrors() throws {
        let dir = Plugins.scratch()
        let path = dir + "/rate.pipe"
        try "nodes:\n  src: {type: testsrc, rate: 1e16}\n  out: {type: null, in: src}\n".write(toFile: path, atomically: true, encoding: .utf8)
        let checked = Checker(registry: BuiltinNodes.registry(), overrides: [OptionOverride(parsing: "src.rate=2e16")!]).check(path: path)
        let errors = checked.diagnostics.filter { $0.severity == .error }
        XCTAssertEqual(errors.count, 2, "\(errors)")
        XCTAssertTrue(errors.contains { $0.location.line == 2 && $0.location.column == 30 && $0.message.contains("out of range") }, "\(errors)")
        XCTAssertTrue(errors.contains { $0.location.file == "--set" && $0.message.contains("out of range") }, "\(errors)")
    }
}
