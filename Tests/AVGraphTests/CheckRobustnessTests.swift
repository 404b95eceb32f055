import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// No input makes `check` crash or hang: each is answered with a diagnostic, quickly.
final class CheckRobustnessTests: XCTestCase {
    let checker = Checker(registry: TestSupport.freshRegistry())

    func checkData(_ data: Data, _ name: String = #function) -> CheckedPipeline {
        let dir = TestSupport.scratch(name)
        let path = dir + "/input.pipe"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: data))
        let start = Date()
        let r = checker.check(path: path)
        XCTAssertLessThan(Date().timeIntervalSince(start), 10, "check must answer within seconds")
        return r
    }

    func assertOneError(_ r: CheckedPipeline, contains words: String, file: StaticString = #filePath, line: UInt = #line) {
        let errors = r.diagnostics.filter { $0.severity == .error }
        XCTAssertFalse(errors.isEmpty, "expected an error", file: file, line: line)
        XCTAssertTrue(words.isEmpty || errors.contains { $0.message.contains(words) }, "'\(words)' not in \(errors)", file: file, line: line)
    }

    func testEmptyFile() { assertOneError(checkData(Data()), contains: "empty") }

    func testBinaryBytes() {
        var g = SystemRandomNumberGenerator()
        let bytes = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &g) }
        assertOneError(checkData(Data(bytes + [0])), contains: "binary")
    }

    func testInvalidUTF8WithoutNul() {
        assertOneError(checkData(Data([0x6e, 0x6f, 0xff, 0xfe, 0x3a, 0x0a])), contains: "UTF-8")
    }

    func testTenThousandLevelsOfFlowNesting() {
        let text = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let r = checkData(Data(("nodes: " + text).utf8))
        assertOneError(r, contains: "nesting")
        XCTAssertEqual(r.diagnostics.first?.location.line, 1)
    }

    func testTenThousandLevelsOfBlockNesting() {
        let text = "nodes:\n" + String(repeating: "- ", count: 10_000) + "x\n"
        assertOneError(checkData(Data(text.utf8)), contains: "nesting")
    }

    func testTenThousandLevelsOfIndentedMappings() {
        var text = "nodes:\n"
        for i in 0..<10_000 { text += String(repeating: " ", count: i + 1) + "k\(i):\n" }
        assertOneError(checkData(Data(text.utf8)), contains: "")
    }

    func testTenMegabyteFile() {
        var text = "nodes:\n"
        let line = "  # padding padding padding padding padding padding padding padding\n"
        while text.utf8.count < 10_000_000 { text += line }
        assertOneError(checkData(Data(text.utf8)), contains: "larger than")
    }

    func testRandomMutationsOfAValidFileNeverCrash() throws {
        let valid = """
        pipeline: fuzz
        duration: 2s
        nodes:
          screen: {type: testsrc, size: 320x240, rate: 30, orientation: [{at: 0s, value: up}, {at: 1s, value: left}]}
          app:    {type: tone, freq: 440, rate: 44100, channels: 2}
          mic:    {type: tone, freq: 880, start: 1s}
          upright: {type: orient, in: screen}
          fit:    {type: resize, in: upright, size: 160x120, mode: fit}
          smooth: {type: fps, in: fit, rate: 30}
          mix:    {type: mixer, in: [app, mic], rate: 44100, gain: {mic: 1.5}}
          video:  {type: h264, in: smooth, bitrate: 500k}
          audio:  {type: aac, in: mix}
          out:    {type: null, in: [video, audio]}
        """
        XCTAssertTrue(checkData(Data(valid.utf8)).isValid, checkData(Data(valid.utf8)).diagnostics.description)
        var rng = SplitMix(seed: 42)
        let alphabet = Array("{}[]:,-#'\"\n xX0123456789abcdefghijklmnopqrstuvwxyz.&*!|>%@`")
        let bytes = Array(valid)
        for _ in 0..<300 {
            var m = bytes
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let i = Int(rng.next() % UInt64(m.count))
                switch rng.next() % 3 {
                case 0: m[i] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: m.remove(at: i)
                default: m.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: i)
                }
            }
            let r = checker.check(path: write(String(m)))
            for d in r.diagnostics {
                XCTAssertGreaterThanOrEqual(d.location.line, 1)
                XCTAssertFalse(d.message.isEmpty)
            }
        }
    }

    lazy var fuzzDir = TestSupport.scratch("fuzz")
    func write(_ s: String) -> String {
        let p = fuzzDir + "/m.pipe"
        try? s.write(toFile: p, atomically: false, encoding: .utf8)
        return p
    }
}

/// A small deterministic generator, so a failing mutation can be replayed.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
