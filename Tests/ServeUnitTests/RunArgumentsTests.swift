import AVGraphServe
import XCTest

/// One session's command line and file paths: the template's placeholders filled for it.
final class RunArgumentsTests: XCTestCase {
    func testPlaceholdersSetsAndTheBackendsOverrides() {
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let run = RunArguments(template: "/srv/t.pipe", session: "s1", key: "phone/../1", app: "", start: start,
                               sets: ["out.path=/rec/{app}-{key}.mp4", "v.bitrate=1M"], overrides: ["fit.size=160x120"], pages: true,
                               sinkPaths: ["out": "/srv/rec/{key}.mp4", "other": "/srv/{session}.mp4"])
        XCTAssertEqual(run.arguments, ["run", "/srv/t.pipe", "--name", "s1", "--events", "json",
                                       "--placeholder", "key=phone/../1", "--placeholder", "app=_", "--placeholder", "session=s1",
                                       "--placeholder", "start=20231114-221320",
                                       "--set", "out.path=/rec/_-phone_.._1.mp4", "--set", "v.bitrate=1M", "--set", "fit.size=160x120",
                                       "--http", "127.0.0.1:0"])
        XCTAssertEqual(run.sinkPaths, ["out": "/rec/_-phone_.._1.mp4", "other": "/srv/s1.mp4"])
    }

    func testARelativePathOverrideIsBesideTheTemplate() {
        let run = RunArguments(template: "/srv/t.pipe", session: "s2", key: "k", app: "live", start: Date(), sets: [],
                               overrides: ["out.path=rec/{key}.mp4"], pages: false, sinkPaths: ["out": "/srv/x.mp4"])
        XCTAssertEqual(run.sinkPaths, ["out": "/srv/rec/k.mp4"])
        XCTAssertFalse(run.arguments.contains("--http"))
    }

    func testSafeKeepsNamesHarmless() {
        XCTAssertEqual(TemplatePlaceholders.safe(".."), "_..")
        XCTAssertEqual(TemplatePlaceholders.safe(""), "_")
        XCTAssertEqual(TemplatePlaceholders.safe("a b/c"), "a_b_c")
        XCTAssertEqual(TemplatePlaceholders.safe(String(repeating: "x", count: 200)).count, 96)
    }
}
