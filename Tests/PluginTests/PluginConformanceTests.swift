import AVGraph
import AVGraphTesting
import Foundation
import XCTest

/// Both example plugins (and the fixture that declares its own event and option types) through the conformance verifier, loaded from their libraries as a user loads them.
final class PluginConformanceTests: XCTestCase {
    func testBothExamplePluginsConform() throws {
        let registry = try Plugins.registry()
        try PluginLoader.load([try PluginTests.declares], into: registry)
        let video = StreamFormat.video(width: 320, height: 240, pixelFormat: "yuv420p", frameRate: Rational(30, 1))
        let mono = StreamFormat.audio(sampleRate: 48000, channels: 1, sampleFormat: "fltp")
        let cases: [String: ConformanceCase] = [
            "watermark": .init(try XCTUnwrap(registry["watermark"]), options: "image: \(Plugins.packageRoot)/assets/privacy.png",
                               inputs: [.init(format: video, name: "camera", buffers: try Conformance.rawVideo(video))]),
            "ducker": .init(try XCTUnwrap(registry["ducker"]),
                            inputs: [.init(format: mono, name: "app", pad: "main", buffers: try Conformance.rawAudio(mono)),
                                     .init(format: mono, name: "mic", pad: "key", buffers: try Conformance.rawAudio(mono, seconds: 1))]),
            // Its own option type at its default, its own event kind declared.
            "cadence": .init(try XCTUnwrap(registry["cadence"]), inputs: [.init(format: video, name: "camera", buffers: try Conformance.rawVideo(video))]),
        ]
        for name in ["watermark", "ducker", "cadence"] {
            XCTAssertEqual(registry.origin(of: name).map { $0 != "built-in" }, true, "\(name) comes from its plugin")
            let problems = Conformance.verify(try XCTUnwrap(cases[name]))
            XCTAssertEqual(problems, [], "\(name) does not conform:\n" + problems.joined(separator: "\n"))
        }
    }
}
