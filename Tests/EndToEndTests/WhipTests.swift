import AVGraphTesting
import Foundation
import XCTest

/// WHIP ingest (RFC 9725) against publishers nobody here wrote: headless Chromium with its
/// camera and microphone faked from files, aiortc, GStreamer's webrtcbin. Each publishes the
/// flash-and-beep clip to a run's `whip` source, which records it; the recording is decoded:
/// its pictures counted and every flash paired with its beep.
final class WhipTests: XCTestCase {
    static let seconds = 10

    /// A run recording what its `whip` source receives, ending 8 s after the publisher leaves (or
    /// without one: a browser takes seconds to start).
    static func startRun(_ dir: String, port: Int, idle: String = "8s", options: String = "") throws -> BackgroundRun {
        CLI.write("""
            pipeline: whip
            realtime: true
            nodes:
              src:    {type: whip, url: "whip://127.0.0.1:\(port)", keys: [phone-key], idle: \(idle), timeout: 2s\(options)}
              fit:    {type: resize, in: src.video, size: 640x360, mode: fit}
              smooth: {type: fps, in: fit, rate: 30}
              mix:    {type: mixer, in: [src.audio], rate: 48000}
              video:  {type: h264, in: smooth, bitrate: 2000k}
              audio:  {type: aac, in: mix, bitrate: 128k}
              out:    {type: file, in: [video, audio], path: out.mp4, overwrite: true}
            """, to: dir + "/whip.pipe")
        let run = try BackgroundRun(["run", dir + "/whip.pipe", "--events", "json"], cwd: dir)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        return run
    }

    /// `avgraph serve` with a WHIP door; each publisher recorded to `rec/{key}-{session}.mp4`.
    static func startServe(_ dir: String, port: Int, in test: XCTestCase) throws -> BackgroundRun {
        CLI.write("""
            pipeline: served
            nodes:
              src:    {type: publisher, idle: 5s, timeout: 2s}
              fit:    {type: resize, in: src.video, size: 640x360, mode: fit}
              smooth: {type: fps, in: fit, rate: 30}
              mix:    {type: mixer, in: [src.audio], rate: 48000}
              video:  {type: h264, in: smooth, bitrate: 2000k}
              audio:  {type: aac, in: mix, bitrate: 128k}
              out:    {type: file, in: [video, audio], path: "rec/{key}.mp4"}
            """, to: dir + "/serve.pipe")
        try FileManager.default.createDirectory(atPath: dir + "/rec", withIntermediateDirectories: true)
        return try ServeTests.startServe([dir + "/serve.pipe", "--listen", "whip://127.0.0.1:\(port)", "--open"], dir: dir, environment: ProcessInfo.processInfo.environment,
                                         in: test)
    }

    /// Serve's recording of `key` once its run ended; serve stopped then.
    static func served(_ serve: BackgroundRun, dir: String, key: String) -> String {
        XCTAssertTrue(ServeTests.waitFor(timeout: 30) { serve.stderr.contains("ended after") }, serve.stderr)
        serve.process.interrupt()
        _ = serve.waitForExit(timeout: 20)
        return dir + "/rec/\(key).mp4"
    }

    /// The clip as Chromium's fake devices take it: a Y4M camera and a WAV microphone.
    static func fakeDevices(_ dir: String) throws -> (video: String, audio: String) {
        try FlashBeep.makeClip(dir + "/clip.mp4", seconds: seconds, size: "640x360", busy: true)
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-i", dir + "/clip.mp4", "-map", "0:v", "-pix_fmt", "yuv420p", dir + "/camera.y4m",
                           "-map", "0:a", "-ac", "2", "-ar", "48000", dir + "/microphone.wav"])
        return (dir + "/camera.y4m", dir + "/microphone.wav")
    }

    /// What the recording shows: pictures, and each flash against its beep.
    static func assertRecorded(_ path: String, client: String, minimumPictures: Int) throws {
        let m = try FlashBeep.measure(path)
        let (median, worst) = FlashBeep.figures(m)
        print("whip \(client): \(m.videoTimes.count) pictures, \(m.flashes.count) flashes, \(m.beeps.count) beeps, flash minus beep median \(FlashBeep.ms(median)) ms, worst \(FlashBeep.ms(worst)) ms")
        XCTAssertGreaterThanOrEqual(m.videoTimes.count, minimumPictures, "the publish recorded whole")
        XCTAssertGreaterThanOrEqual(m.offsets.count, Self.seconds - 3, "flashes paired with beeps")
        XCTAssertLessThanOrEqual(worst, 1.0 / 30 + 0.001, "every flash within one frame of its beep")
    }

    func testChromiumPublishesH264InSyncThroughServe() throws {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        let devices = try Self.fakeDevices(dir)
        let serve = try Self.startServe(dir, port: port, in: self)
        let stats = dir + "/chromium.json"
        let out = try CLI.shell([CLI.packageRoot + "/scripts/whip-chromium", "--url", "http://127.0.0.1:\(port)/whip/phone-key", "--video", devices.video,
                                 "--audio", devices.audio, "--seconds", "\(Self.seconds)", "--codec", "h264", "--stats", stats])
        XCTAssertTrue(out.contains("connected after"), out)
        let figures = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as? [String: Any] ?? [:]
        print("whip chromium: \(out.split(separator: "\n").first ?? ""); codec \(figures["codec"] ?? "?"), encoder \(figures["encoder_implementation"] ?? "?"), video kbps max \(figures["video_kbps_max"] ?? "?"), last second \(figures["video_kbps_last_second"] ?? "?")")
        XCTAssertTrue((figures["codec"] as? String ?? "").lowercased().contains("h264"), "Chromium sent H.264")
        // On avgraph's receiver reports alone Chromium's sender stays near 550 kbps over 10 s; with
        // transport-wide feedback it climbs to its 360p cap (about 1.7 Mbit/s).
        XCTAssertGreaterThan(figures["video_kbps_max"] as? Double ?? 0, 1000, "Chromium's sender climbed on avgraph's transport-wide feedback")
        // Chromium's OpenH264 starts at about 15 pictures a second for 2 s.
        try Self.assertRecorded(Self.served(serve, dir: dir, key: "phone-key"), client: "chromium", minimumPictures: Self.seconds * 30 - 60)
    }

    /// aiortc (VP8 and Opus from the clip, its own WHIP client: a POST of its offer).
    static let aiortc = #"""
import asyncio, json, ssl, sys, time, urllib.request
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer
url, clip, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
async def main():
    # No STUN server (aiortc's default is Google's): avgraph is ICE-lite, its answer has the address.
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    player = MediaPlayer(clip)
    pc.addTrack(player.video)
    pc.addTrack(player.audio)
    await pc.setLocalDescription(await pc.createOffer())
    req = urllib.request.Request(url, data=pc.localDescription.sdp.encode(), method="POST", headers={"Content-Type": "application/sdp"})
    posted = time.monotonic()
    # An https endpoint of the test's own is self-signed.
    unverified = ssl._create_unverified_context()
    with urllib.request.urlopen(req, context=unverified) as r:
        status, location, answer = r.status, r.headers["Location"], r.read().decode()
    await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
    while pc.connectionState != "connected" and time.monotonic() - posted < 10:
        await asyncio.sleep(0.02)
    connected = time.monotonic() - posted
    await asyncio.sleep(seconds)
    sent = [s for s in (await pc.getStats()).values() if s.type == "outbound-rtp"]
    end = urllib.request.Request(urllib.parse.urljoin(url, location), method="DELETE")
    with urllib.request.urlopen(end, context=unverified) as r: deleted = r.status
    await pc.close()
    print(json.dumps({"status": status, "deleted": deleted, "state": pc.connectionState, "connected_after": connected,
                      "sent": {s.kind: s.bytesSent for s in sent}}))
asyncio.run(main())
"""#

    func testAiortcPublishesVp8InSyncPastGarbageThroughServe() throws {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        try FlashBeep.makeClip(dir + "/clip.mp4", seconds: Self.seconds + 1, size: "640x360", busy: true)
        let serve = try Self.startServe(dir, port: port, in: self)
        // Strangers on the media port first: STUN, DTLS and RTP-looking garbage from unknown addresses.
        let garbage = try PythonWitness.run("""
            import os, socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for first in (0, 1, 22, 128, 200, 255):
                for _ in range(300): s.sendto(bytes([first]) + os.urandom(150), ("127.0.0.1", int(sys.argv[1])))
            print(1800)
            """, ["\(port)"]) as? Int
        XCTAssertEqual(garbage, 1800)
        let result = try PythonWitness.run(Self.aiortc, ["http://127.0.0.1:\(port)/whip/phone-key", dir + "/clip.mp4", "\(Self.seconds)"]) as? [String: Any] ?? [:]
        let sent = (result["sent"] as? [String: Any])?["video"] as? Int ?? 0
        print("whip aiortc: \(result); video \(sent * 8 / Self.seconds / 1000) kbit/s on average (aiortc's own count)")
        XCTAssertEqual(result["status"] as? Int, 201)
        XCTAssertEqual(result["deleted"] as? Int, 200, "DELETE on the Location ended the session")
        XCTAssertLessThan(result["connected_after"] as? Double ?? 99, 2, "ICE and DTLS done")
        try Self.assertRecorded(Self.served(serve, dir: dir, key: "phone-key"), client: "aiortc", minimumPictures: Self.seconds * 30 - 15)
        XCTAssertTrue(serve.stderr.contains("datagrams from addresses in no session"), "the garbage counted and said: \(serve.stderr)")
    }

    /// GStreamer's webrtcbin (`scripts/whip-gst`) publishing the clip in `codec` through `serve`,
    /// the recording checked; returns its stats (what it offered, what it sent).
    @discardableResult
    static func publishFromGStreamer(codec: String, in test: XCTestCase) throws -> [String: Any] {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        try FlashBeep.makeClip(dir + "/clip.mp4", seconds: seconds + 2, size: "640x360", busy: true)
        let serve = try startServe(dir, port: port, in: test)
        let stats = dir + "/gst.json"
        let out = try CLI.shell([CLI.packageRoot + "/scripts/whip-gst", "--url", "http://127.0.0.1:\(port)/whip/gst-key", "--input", dir + "/clip.mp4",
                                 "--seconds", "\(seconds)", "--codec", codec, "--stats", stats])
        XCTAssertTrue(out.contains("connected after"), out)
        let figures = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as? [String: Any] ?? [:]
        print("whip gstreamer \(codec): \(out.split(separator: "\n").first ?? ""); offered \(figures["offered_video"] ?? "?"), video kbps max \(figures["video_kbps_max"] ?? "?"), last second \(figures["video_kbps_last_second"] ?? "?")")
        try assertRecorded(served(serve, dir: dir, key: "gst-key"), client: "gstreamer \(codec)", minimumPictures: seconds * 30 - 15)
        return figures
    }

    func testGStreamerPublishesH264InSyncThroughServe() throws {
        try Self.publishFromGStreamer(codec: "h264", in: self)
    }

    /// FFmpeg 8.1's own WHIP muxer (PyAV's build): the clip's H.264 as it is, its audio as Opus,
    /// paced by the clip's times. Its offer says `a=setup:passive`: avgraph is the DTLS client.
    static let ffmpegWhip = #"""
import av, json, sys, time
url, clip, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
inp = av.open(clip)
vin, ain = inp.streams.video[0], inp.streams.audio[0]
out = av.open(url, mode="w", format="whip")
vout = out.add_stream_from_template(vin)
aout = out.add_stream("libopus", rate=48000, layout="stereo")
start, sent = time.monotonic(), {"video": 0, "audio": 0}
for packet in inp.demux(vin, ain):
    if packet.dts is None: continue
    t = float(packet.pts * packet.time_base)
    if t > seconds: break
    if start + t > time.monotonic(): time.sleep(start + t - time.monotonic())
    if packet.stream is vin:
        packet.stream = vout; out.mux(packet); sent["video"] += 1
    else:
        for frame in packet.decode():
            frame.pts = None
            for p in aout.encode(frame): out.mux(p); sent["audio"] += 1
out.close()
print(json.dumps(sent))
"""#

    func testFfmpegWhipMuxerPublishesThroughServe() throws {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        try FlashBeep.makeClip(dir + "/clip.mp4", seconds: Self.seconds + 1, size: "640x360", busy: true)
        let serve = try Self.startServe(dir, port: port, in: self)
        let sent = try PythonWitness.run(Self.ffmpegWhip, ["http://127.0.0.1:\(port)/whip/ffmpeg-key", dir + "/clip.mp4", "\(Self.seconds)"]) as? [String: Any] ?? [:]
        print("whip ffmpeg 8.1 (PyAV): sent \(sent)")
        XCTAssertGreaterThanOrEqual(sent["video"] as? Int ?? 0, Self.seconds * 30)
        try Self.assertRecorded(Self.served(serve, dir: dir, key: "ffmpeg-key"), client: "ffmpeg 8.1", minimumPictures: Self.seconds * 30)
    }

    /// `whips://`: the endpoint over HTTPS (a certificate of the test's own); aiortc publishes
    /// through it, and a wrong key is refused there too.
    func testHttpsEndpoint() throws {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        try FlashBeep.makeClip(dir + "/clip.mp4", seconds: 5, size: "640x360", busy: true)
        _ = try CLI.shell(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                           "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem"])
        CLI.write("""
            pipeline: whips
            realtime: true
            nodes:
              src:   {type: whip, url: "whips://127.0.0.1:\(port)", cert: cert.pem, key: key.pem, keys: [phone-key], idle: 8s, timeout: 2s}
              video: {type: h264, in: src.video, passthrough: auto}
              out:   {type: file, in: [video], path: out.mp4}
            """, to: dir + "/whips.pipe")
        let run = try BackgroundRun(["run", dir + "/whips.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let refused = try CLI.shell(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Content-Type: application/sdp", "--data-binary", "v=0",
                                     "https://127.0.0.1:\(port)/whip/wrong"])
        XCTAssertEqual(refused, "401", "a wrong key refused over TLS")
        XCTAssertNotEqual(try? CLI.shell(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)/whip/phone-key"]), "404", "no plain HTTP on a whips:// endpoint")
        let result = try PythonWitness.run(Self.aiortc, ["https://127.0.0.1:\(port)/whip/phone-key", dir + "/clip.mp4", "4"]) as? [String: Any] ?? [:]
        XCTAssertEqual(result["status"] as? Int, 201, "\(result)")
        XCTAssertEqual(result["deleted"] as? Int, 200)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        let pictures = try CLI.videoFrameTimes(dir + "/out.mp4").count
        print("whips: aiortc over https, \(pictures) pictures recorded")
        XCTAssertGreaterThanOrEqual(pictures, 4 * 30 - 15)
    }

    /// The endpoint's refusals, each before any media: statuses and the CORS a page needs.
    func testRefusalsAndCors() throws {
        let dir = CLI.scratch(), port = try LoopbackPort.free()
        let run = try Self.startRun(dir, port: port, idle: "60s", options: ", handshake-timeout: 1s")
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        let offer = Self.offer(video: "H264/90000", fmtp: "packetization-mode=1")
        CLI.write(offer, to: dir + "/offer.sdp")
        CLI.write(Self.offer(video: "AV1X/90000", fmtp: "x=1"), to: dir + "/av1x.sdp")
        CLI.write("v=0\r\nthis is not sdp\r\n", to: dir + "/bad.sdp")
        let base = "http://127.0.0.1:\(port)/whip"
        func curl(_ args: [String]) throws -> (status: Int, headers: String) {
            let out = try CLI.shell(["curl", "-s", "-D", "-", "-o", "/dev/null", "-w", "\n%{http_code}"] + args)
            return (Int(out.split(separator: "\n").last ?? "") ?? 0, out)
        }
        let post = ["-X", "POST", "-H", "Content-Type: application/sdp"]
        XCTAssertEqual(try curl(post + ["--data-binary", "@" + dir + "/offer.sdp", base + "/wrong-key"]).status, 401, "a wrong key")
        XCTAssertEqual(try curl(post + ["--data-binary", "@" + dir + "/offer.sdp", base]).status, 401, "no key at all")
        XCTAssertEqual(try curl(post + ["--data-binary", "@" + dir + "/bad.sdp", base + "/phone-key"]).status, 400, "not SDP")
        XCTAssertEqual(try curl(post + ["--data-binary", "@" + dir + "/av1x.sdp", base + "/phone-key"]).status, 406, "no codec avgraph takes")
        XCTAssertEqual(try curl(["-X", "POST", "-H", "Content-Type: text/plain", "--data-binary", "@" + dir + "/offer.sdp", base + "/phone-key"]).status, 415)
        let preflight = try curl(["-X", "OPTIONS", "-H", "Origin: https://elsewhere.example", "-H", "Access-Control-Request-Method: POST", base + "/phone-key"])
        XCTAssertEqual(preflight.status, 204)
        XCTAssertTrue(preflight.headers.contains("Access-Control-Allow-Origin: *"), preflight.headers)
        XCTAssertTrue(preflight.headers.contains("Access-Control-Allow-Headers: Authorization, Content-Type"), preflight.headers)
        // The bearer token is the key too; the session then never connects, and is released.
        let created = try curl(post + ["-H", "Authorization: Bearer phone-key", "--data-binary", "@" + dir + "/offer.sdp", base])
        XCTAssertEqual(created.status, 201, created.headers)
        let location = created.headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("location:") }.map { $0.dropFirst(9).trimmingCharacters(in: .whitespaces) }
        XCTAssertEqual(try curl(["-X", "PATCH", "-H", "Content-Type: application/trickle-ice-sdpfrag", "--data-binary", "a=end-of-candidates", "http://127.0.0.1:\(port)" + (location ?? "")]).status, 204)
        XCTAssertTrue(ServeTests.waitFor(timeout: 5) { run.stderr.contains("released: no ICE and DTLS within 1 s") },
                      "the unconnected session released after handshake-timeout: \(run.stderr)")
        XCTAssertEqual(try curl(["-X", "DELETE", "http://127.0.0.1:\(port)" + (location ?? "")]).status, 404, "a released session is gone")
        XCTAssertEqual(try curl(["http://127.0.0.1:\(port)/elsewhere"]).status, 404)
        run.process.interrupt()
        // Nobody published: the run says it wrote nothing.
        XCTAssertNotEqual(run.waitForExit(timeout: 20), 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("wrote nothing"), run.stderr)

        // At most 16 offers wait for their publisher at once (10 s each, here): the 17th is told to come back.
        let busyDir = dir + "/busy", busyPort = try LoopbackPort.free()
        try FileManager.default.createDirectory(atPath: busyDir, withIntermediateDirectories: true)
        let busy = try Self.startRun(busyDir, port: busyPort, idle: "60s")
        addTeardownBlock { if busy.process.isRunning { busy.process.terminate() } }
        var statuses: [Int] = []
        for _ in 0..<17 { statuses.append(try curl(post + ["--data-binary", "@" + dir + "/offer.sdp", "http://127.0.0.1:\(busyPort)/whip/phone-key"]).status) }
        XCTAssertEqual(statuses, Array(repeating: 201, count: 16) + [503], "16 handshakes at once, then 503")
        busy.process.interrupt()
        _ = busy.waitForExit(timeout: 20)
    }

    /// An offer as browsers write it (BUNDLE, rtcp-mux, ICE credentials, a SHA-256 fingerprint).
    static func offer(video: String, fmtp: String) -> String {
        /// What both sections share: ICE credentials, a fingerprint, DTLS's role.
        func section(_ kind: String, mid: Int, pt: Int, rtpmap: String) -> [String] {
            ["m=\(kind) 9 UDP/TLS/RTP/SAVPF \(pt)", "c=IN IP4 0.0.0.0", "a=mid:\(mid)", "a=sendonly", "a=rtcp-mux", "a=ice-ufrag:abcd",
             "a=ice-pwd:abcdefghijklmnopqrstuvwx", "a=fingerprint:sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":"),
             "a=setup:actpass", "a=rtpmap:\(pt) \(rtpmap)"]
        }
        let lines = ["v=0", "o=- 1 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE 0 1"]
            + section("video", mid: 0, pt: 102, rtpmap: video) + ["a=fmtp:102 \(fmtp)"]
            + section("audio", mid: 1, pt: 111, rtpmap: "opus/48000/2")
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}
