import AVGraph
import XCTest

final class ValueSyntaxTests: XCTestCase {
    func testSizes() {
        XCTAssertEqual(ValueSyntax.size("1280x720")?.width, 1280)
        XCTAssertNil(ValueSyntax.size("1280x"))
        XCTAssertNil(ValueSyntax.size("0x720"))
    }

    func testRates() {
        XCTAssertEqual(ValueSyntax.rate("30"), Rational(30, 1))
        XCTAssertEqual(ValueSyntax.rate("29.97"), Rational(30000, 1001))
        XCTAssertEqual(ValueSyntax.rate("30000/1001"), Rational(30000, 1001))
        XCTAssertEqual(ValueSyntax.rate("12.5"), Rational(25, 2))
        XCTAssertNil(ValueSyntax.rate("-30"))
        XCTAssertNil(ValueSyntax.rate("1/0"))
    }

    func testBitrates() {
        XCTAssertEqual(ValueSyntax.bitrate("2500k"), 2_500_000)
        XCTAssertEqual(ValueSyntax.bitrate("2.5M"), 2_500_000)
        XCTAssertEqual(ValueSyntax.bitrate("128000"), 128_000)
        XCTAssertNil(ValueSyntax.bitrate("fast"))
    }

    func testDurations() {
        XCTAssertEqual(ValueSyntax.duration("60s"), 60)
        XCTAssertEqual(ValueSyntax.duration("1.5s"), 1.5)
        XCTAssertEqual(ValueSyntax.duration("500ms"), 0.5)
        XCTAssertEqual(ValueSyntax.duration("2m"), 120)
        XCTAssertNil(ValueSyntax.duration("soon"))
    }

    func testGains() {
        XCTAssertEqual(ValueSyntax.gain("-6dB")!, 0.501, accuracy: 0.001)
        XCTAssertEqual(ValueSyntax.gain("0.5"), 0.5)
        XCTAssertNil(ValueSyntax.gain("loud"))
    }

    func testByteSizes() {
        XCTAssertEqual(ValueSyntax.byteSize("50MB"), 50_000_000)
        XCTAssertEqual(ValueSyntax.byteSize("64MiB"), 64 << 20)
        XCTAssertEqual(ValueSyntax.byteSize("512kB"), 512_000)
    }

    func testColors() {
        XCTAssertEqual(ValueSyntax.color("black"), RGB(r: 0, g: 0, b: 0))
        XCTAssertEqual(ValueSyntax.color("#202020"), RGB(r: 32, g: 32, b: 32))
        XCTAssertNil(ValueSyntax.color("#12345"))
    }

    func testSchedulesParse() throws {
        let loc = SourceLocation(file: "t", line: 1, column: 1)
        let v = PipeValue.list([.map([
            PipeEntry(key: "at", keyLocation: loc, value: .scalar("20s", loc)),
            PipeEntry(key: "for", keyLocation: loc, value: .scalar("10s", loc)),
        ], loc)], loc)
        XCTAssertEqual(try OptionType.spans.parse(v), .spans([TimeSpan(at: 20, length: 10)]))
    }

    func testSuggestions() {
        XCTAssertEqual(Suggest.closest(to: "bitrat", in: ["bitrate", "maxrate", "gop"]), "bitrate")
        XCTAssertEqual(Suggest.closest(to: "resise", in: ["resize", "resample", "orient"]), "resize")
        XCTAssertNil(Suggest.closest(to: "zzzz", in: ["bitrate"]))
    }
}
