import AVGraphTesting
import Foundation
import XCTest

/// WHIP ingest of VP9 and AV1 from headless Chromium (its own encoders: libvpx, and libaom for
/// AV1), its camera and microphone faked from the flash-and-beep clip; `serve`'s WHIP door and
/// its run record what it receives (avgraph's depacketizers, libavcodec's VP9 and libdav1d decoders),
/// and the recording is decoded: its pictures counted, every flash paired with its beep. HEVC
/// from GStreamer's webrtcbin (x265enc, rtph265pay) the same way, through `serve`.
final class WhipCodecTests: XCTestCase {
    private func publishFromChromium(codec: String, mime: String) throws {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        let devices = try WhipTests.fakeDevices(dir)
        // Through serve: its run starts at the publish, however long the browser takes to start.
        let serve = try WhipTests.startServe(dir, port: port, in: self)
        let stats = dir + "/chromium.json"
        let out = try CLI.shell([CLI.packageRoot + "/scripts/whip-chromium", "--url", "http://127.0.0.1:\(port)/whip/phone-key", "--video", devices.video,
                                 "--audio", devices.audio, "--seconds", "\(WhipTests.seconds)", "--codec", codec, "--stats", stats])
        XCTAssertTrue(out.contains("connected after"), out)
        let figures = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as? [String: Any] ?? [:]
        print("whip chromium \(codec): \(out.split(separator: "\n").first ?? ""); codec \(figures["codec"] ?? "?"), encoder \(figures["encoder_implementation"] ?? "?"), frames encoded \(figures["frames_encoded"] ?? "?"), video kbps max \(figures["video_kbps_max"] ?? "?")")
        XCTAssertTrue((figures["codec"] as? String ?? "").lowercased().hasPrefix("video/" + mime), "Chromium sent \(mime)")
        try WhipTests.assertRecorded(WhipTests.served(serve, dir: dir, key: "phone-key"), client: "chromium \(codec)", minimumPictures: WhipTests.seconds * 30 - 60)
    }

    func testChromiumPublishesVp9InSync() throws {
        try publishFromChromium(codec: "vp9", mime: "vp9")
    }

    func testChromiumPublishesAv1InSync() throws {
        try publishFromChromium(codec: "av1", mime: "av1")
    }

    /// webrtcbin 1.22 offers H265/90000 for x265enc's stream; avgraph's answer takes it, its
    /// depacketizer (RFC 7798) reassembles what rtph265pay sends (the parameter sets aggregated,
    /// slices in fragmentation units), libavcodec's HEVC decoder decodes it.
    func testGStreamerPublishesH265InSyncThroughServe() throws {
        let figures = try WhipTests.publishFromGStreamer(codec: "h265", in: self)
        XCTAssertEqual((figures["offered_video"] as? [String])?.first, "H265/90000", "webrtcbin offered H.265")
    }
}
