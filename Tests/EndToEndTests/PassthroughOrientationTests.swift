import AVGraphTesting
import Foundation
import XCTest

/// A turned phone in passthrough (issue 41): its portrait picture sent stored landscape with a
/// display orientation SEI, recorded through `orient` + `privacy` + `h264 passthrough: auto` into
/// MP4. The pictures stay as sent and the orientation becomes the track's display matrix.
extension PassthroughTests {
    /// Upright 720x1280 (a white marker in its top-left corner), stored turned a quarter
    /// counter-clockwise (1280x720) with an H.264 display orientation SEI saying how to stand it
    /// up, as a phone's encoder sends its camera's picture; a keyframe every 2 s, AAC.
    static func turnedPhoneClip(_ path: String, seconds: Int) throws {
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi",
                           "-i", "testsrc2=s=720x1280:r=30:d=\(seconds),drawbox=x=0:y=0:w=160:h=160:c=white:t=fill,transpose=cclock",
                           "-f", "lavfi", "-i", "sine=f=440:r=48000:d=\(seconds)", "-c:v", "libx264", "-preset", "ultrafast",
                           "-profile:v", "main", "-g", "\(gop)", "-keyint_min", "\(gop)", "-sc_threshold", "0", "-bf", "0",
                           "-b:v", "2500k", "-pix_fmt", "yuv420p", "-bsf:v", "h264_metadata=display_orientation=insert:rotate=270",
                           "-c:a", "aac", "-shortest", path])
    }

    func testTurnedPhoneRecordedAsSentWithItsOrientationAsTheDisplayMatrix() throws {
        let seconds = 10
        let dir = CLI.scratch()
        let flv = dir + "/phone.flv"
        try Self.turnedPhoneClip(flv, seconds: seconds)
        let port = try LoopbackPort.free()
        let assets = CLI.packageRoot + "/assets"
        CLI.write("""
        pipeline: passthrough-turned
        nodes:
          src:     {type: rtmp, listen: true, idle: 2s, size: 1280x720, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          up:      {type: orient, in: src.video}
          privacy: {type: privacy, in: up, image: \(assets)/privacy.png}
          video:   {type: h264, in: privacy, passthrough: auto, preset: ultrafast, queue: {size: 60}}
          audio:   {type: aac, in: src.audio}
          out:     {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let check = try CLI.run(["check", dir + "/p.pipe"])
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        XCTAssertTrue((check.stdout + check.stderr).contains("'up' leaves the pictures as sent: their orientation reaches 'out' as the display matrix"), check.stdout)
        let switches = [(90, 200)]
        let (run, warnings) = try record(dir, flv: flv, port: port, switches: switches)
        let recording = dir + "/out.mp4"
        XCTAssertEqual(warnings, [], "the phone's stream passes, its orientation unchanged")
        XCTAssertEqual(Self.videoBytes(run, node: "src"), 0, "no picture was decoded: the orientation read from the SEI, each picture sent on as its packet")
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        XCTAssertEqual(account["encoded"] as? Int, 240 - 90, "the card span alone is encoded: from the switch to the next keyframe after it")
        XCTAssertEqual(account["passed"] as? Int, seconds * 30 - (240 - 90))

        // The track: stored as sent (1280x720), shown by its display matrix turned a quarter.
        let video = try XCTUnwrap(CLI.stream(try CLI.probe(recording), "video"))
        XCTAssertEqual(video["width"] as? Int, 1280)
        XCTAssertEqual(video["height"] as? Int, 720)
        let sideData = (video["side_data_list"] as? [[String: Any]]) ?? []
        let rotation = sideData.first { $0["side_data_type"] as? String == "Display Matrix" }?["rotation"] as? Int
        XCTAssertEqual(rotation.map(abs), 90, "a quarter-turn display matrix: \(sideData)")
        // Chromium's <video> applies it: the picture it shows is portrait.
        let page = dir + "/play.html"
        try "<video id=v muted src=\"out.mp4\"></video>".write(toFile: page, atomically: true, encoding: .utf8)
        let browser = try XCTUnwrap(PythonWitness.run(OperatorPageTests.chromium + #"""
d.get("file://" + sys.argv[1])
ready = until(lambda: d.execute_script("return document.getElementById('v').readyState >= 1"), 20)
print(json.dumps(d.execute_script("const v = document.getElementById('v'); return {width: v.videoWidth, height: v.videoHeight};")))
d.quit()
"""#, [page]) as? [String: Any])
        XCTAssertEqual(browser["width"] as? Int, 720, "Chromium shows it upright: \(browser)")
        XCTAssertEqual(browser["height"] as? Int, 1280, "\(browser)")

        // Every picture outside the card span is the phone's packet, byte for byte.
        let expected = try Self.assertSpliced(recording, source: flv, switches: switches, pictures: seconds * 30)
        XCTAssertEqual(try Tool.run(["ffmpeg", "-v", "error", "-xerror", "-i", recording, "-f", "null", "-"]).stderr, "", "ffmpeg decodes it without an error")

        // As a player shows it (ffmpeg's autorotate): upright at the turned size, the marker top
        // left, each picture the phone's stood up; the span's pictures the card, upright too.
        let size = (w: 90, h: 160)
        let shown = try HlsWitness.grayPictures(recording, width: size.w, height: size.h)
        // The phone's pictures stood up by hand the way its SEI says (ffmpeg would also turn by the
        // SEI of the pictures it decodes: -noautorotate, so it is turned once).
        let upright = try CLI.capture(["ffmpeg", "-v", "error", "-noautorotate", "-i", flv, "-map", "0:v:0", "-fps_mode", "passthrough",
                                       "-vf", "transpose=clock", "-s", "\(size.w)x\(size.h)", "-pix_fmt", "gray", "-f", "rawvideo", "-"])
        let original = stride(from: 0, to: upright.count - size.w * size.h + 1, by: size.w * size.h).map { [UInt8](upright[$0..<$0 + size.w * size.h]) }
        let fitted = try CLI.capture(["ffmpeg", "-v", "error", "-i", assets + "/privacy.png", "-vf",
                                      "scale=720:1280:force_original_aspect_ratio=decrease,pad=720:1280:(ow-iw)/2:(oh-ih)/2,scale=\(size.w):\(size.h)",
                                      "-pix_fmt", "gray", "-f", "rawvideo", "-"])
        let card = [UInt8](fitted)
        XCTAssertEqual(shown.count, seconds * 30)
        XCTAssertEqual(shown.count, original.count)
        func corner(_ picture: [UInt8]) -> Int { (2..<12).reduce(0) { s, y in s + (2..<12).reduce(0) { $0 + Int(picture[y * size.w + $1]) } } / 100 }
        let inSpan = { (k: Int) in expected.contains { k >= $0.0 && k < $0.1 } }
        var worstSource = 0.0, worstCard = 0.0
        for k in 0..<min(shown.count, original.count) {
            if inSpan(k) {
                worstCard = max(worstCard, Self.meanDistance(shown[k], card))
            } else {
                worstSource = max(worstSource, Self.meanDistance(shown[k], original[k]))
                XCTAssertGreaterThan(corner(shown[k]), 200, "picture \(k): the marker stands top left")
            }
        }
        print("turned passthrough: spans \(expected), worst distance to the phone's upright picture \(worstSource), to the upright card \(worstCard)")
        XCTAssertEqual(worstSource, 0, "the phone's pictures, stood up by the player, as sent")
        XCTAssertLessThan(worstCard, 6, "the card stands upright too")
    }

    /// The phone turned mid-stream: 5 s of portrait stored turned a quarter (SEI: 270), then 5 s
    /// of landscape stored upside down (SEI: 180), one stream under the same parameter sets. The
    /// track keeps the first orientation's display matrix: from the change on, each picture is
    /// stood up, fitted into the portrait picture (bars above and below) and turned back, so
    /// encoded, with one warning; the first part is the phone's packets byte for byte.
    func testTurnedPhoneTurningMidStreamKeepsTheFirstMatrixAndEncodesFromTheChange() throws {
        let dir = CLI.scratch()
        let part = { (name: String, picture: String, rotate: Int) in
            _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "\(picture),drawbox=x=0:y=0:w=160:h=160:c=white:t=fill,\(rotate == 270 ? "transpose=cclock" : "hflip,vflip")",
                               "-c:v", "libx264", "-preset", "ultrafast", "-profile:v", "main", "-g", "\(Self.gop)", "-keyint_min", "\(Self.gop)",
                               "-sc_threshold", "0", "-bf", "0", "-b:v", "2500k", "-pix_fmt", "yuv420p",
                               "-bsf:v", "h264_metadata=display_orientation=insert:rotate=\(rotate)", "-f", "h264", dir + "/" + name])
        }
        try part("a.h264", "testsrc2=s=720x1280:r=30:d=5", 270)
        try part("b.h264", "testsrc2=s=1280x720:r=30:d=5", 180)
        var stream = try Data(contentsOf: URL(fileURLWithPath: dir + "/a.h264"))
        stream.append(try Data(contentsOf: URL(fileURLWithPath: dir + "/b.h264")))
        try stream.write(to: URL(fileURLWithPath: dir + "/ab.h264"))
        let flv = dir + "/phone.flv"
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-framerate", "30", "-i", dir + "/ab.h264", "-f", "lavfi", "-i", "sine=f=440:r=48000:d=10",
                           "-c:v", "copy", "-c:a", "aac", "-shortest", flv])
        let port = try LoopbackPort.free()
        CLI.write("""
        pipeline: passthrough-turning
        nodes:
          src:   {type: rtmp, listen: true, idle: 2s, size: 1280x720, url: "rtmp://127.0.0.1:\(port)/live/phone"}
          up:    {type: orient, in: src.video}
          video: {type: h264, in: up, passthrough: auto, preset: ultrafast, queue: {size: 60}}
          audio: {type: aac, in: src.audio}
          out:   {type: file, in: [video, audio], path: out.mp4}
        """, to: dir + "/p.pipe")
        let (run, warnings) = try record(dir, flv: flv, port: port, switches: [])
        let recording = dir + "/out.mp4"
        XCTAssertEqual(warnings.filter { $0.contains("orientation changed at 5") }.count, 1, "\(warnings)")
        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event")
        XCTAssertEqual(account["passed"] as? Int, 150)
        XCTAssertEqual(account["encoded"] as? Int, 150)
        try Self.assertSpliced(recording, source: flv, switches: [(150, 300)], pictures: 300)
        let video = try XCTUnwrap(CLI.stream(try CLI.probe(recording), "video"))
        let sideData = (video["side_data_list"] as? [[String: Any]]) ?? []
        XCTAssertEqual((sideData.first { $0["side_data_type"] as? String == "Display Matrix" }?["rotation"] as? Int).map(abs), 90, "\(sideData)")

        // As a player shows it: portrait throughout; the landscape part fitted in, upright, bars above and below.
        let size = (w: 90, h: 160)
        let shown = try HlsWitness.grayPictures(recording, width: size.w, height: size.h)
        let landscape = try CLI.capture(["ffmpeg", "-v", "error", "-noautorotate", "-i", dir + "/b.h264", "-vf",
                                         "hflip,vflip,scale=720:-2,pad=720:1280:0:(oh-ih)/2", "-s", "\(size.w)x\(size.h)", "-pix_fmt", "gray", "-f", "rawvideo", "-"])
        let n = size.w * size.h
        let expected = stride(from: 0, to: landscape.count - n + 1, by: n).map { [UInt8](landscape[$0..<$0 + n]) }
        XCTAssertEqual(shown.count, 300)
        XCTAssertEqual(expected.count, 150)
        var worst = 0.0
        for k in 150..<min(shown.count, 300) { worst = max(worst, Self.meanDistance(shown[k], expected[k - 150])) }
        print("turning mid-stream: worst distance of the turned, fitted part to the landscape picture stood up \(worst)")
        XCTAssertLessThan(worst, 8, "the landscape pictures stand upright, fitted into the portrait track")
    }

    /// Runs `dir/p.pipe`, publishes `flv` to it with in-band privacy `switches` (on, off in
    /// pictures at 30 fps) and waits for both to end; the run and its warnings.
    private func record(_ dir: String, flv: String, port: Int, switches: [(Int, Int)]) throws -> (BackgroundRun, [String]) {
        let run = try startListening(dir + "/p.pipe", in: dir)
        let publish = try Tool.run([CLI.packageRoot + "/scripts/rtmp-publish", flv, "rtmp://127.0.0.1:\(port)/live/phone"]
            + switches.flatMap { ["--privacy", "\($0.0 * 100 / 3)ms:\(($0.1 - $0.0) * 100 / 3)ms"] }, timeout: 40)
        XCTAssertEqual(publish.status, 0, publish.stderr)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        return (run, run.events.filter { $0["event"] as? String == "warning" }.compactMap { $0["message"] as? String })
    }

    /// `check` says per `orient` whether its pictures stay as sent: an `hls` sink or an `rtmp`
    /// push cannot carry a display matrix, so there the pictures are turned (and encoded).
    func testCheckSaysWhereTheOrientationIsTurnedInstead() throws {
        let dir = CLI.scratch()
        for (sink, carried) in [("{type: file, in: [video], path: out.mp4}", true), ("{type: file, in: [video], path: out.flv}", false),
                                ("{type: hls, in: [video], path: hls/master.m3u8}", false),
                                ("{type: rtmp, in: [video], url: \"rtmp://127.0.0.1:1935/live/out\"}", false)] {
            CLI.write("""
            pipeline: turned
            nodes:
              src:   {type: rtmp, listen: true, size: 1280x720, url: "rtmp://127.0.0.1:1935/live/phone"}
              up:    {type: orient, in: src.video}
              video: {type: h264, in: up, passthrough: auto}
              out:   \(sink)
            """, to: dir + "/turned.pipe")
            let check = try CLI.run(["check", dir + "/turned.pipe"])
            XCTAssertEqual(check.status, 0, sink + check.stdout + check.stderr)
            let said = carried ? "'up' leaves the pictures as sent: their orientation reaches 'out' as the display matrix"
                : "'up' turns the pictures upright, so 'video' encodes them: 'out' cannot carry a display matrix"
            XCTAssertTrue((check.stdout + check.stderr).contains(said), "\(sink): \(check.stdout)")
        }
    }
}
