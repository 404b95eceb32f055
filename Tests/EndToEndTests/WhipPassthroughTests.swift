import AVGraphTesting
import Foundation
import XCTest

/// A phone over WHIP into `h264 passthrough: auto`: aiortc sends the phone's own H.264 (its
/// packets as they are, `MediaPlayer(decode=False)`), avgraph depacketizes them and forwards
/// them undecoded; the recording holds the phone's packets byte for byte outside the card's span.
final class WhipPassthroughTests: XCTestCase {
    static let sender = #"""
import asyncio, json, sys, time, urllib.request
from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.contrib.media import MediaPlayer
url, clip = sys.argv[1], sys.argv[2]
async def main():
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    player = MediaPlayer(clip, decode=False)
    transceiver = pc.addTransceiver(player.video, direction="sendonly")
    transceiver.setCodecPreferences([c for c in RTCRtpSender.getCapabilities("video").codecs if c.mimeType == "video/H264"])
    await pc.setLocalDescription(await pc.createOffer())
    req = urllib.request.Request(url, data=pc.localDescription.sdp.encode(), method="POST", headers={"Content-Type": "application/sdp"})
    with urllib.request.urlopen(req) as r:
        status, location, answer = r.status, r.headers["Location"], r.read().decode()
    await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
    ended = asyncio.Event()
    player.video.on("ended", ended.set)
    await asyncio.wait_for(ended.wait(), 60)
    await asyncio.sleep(1)
    with urllib.request.urlopen(urllib.request.Request(urllib.parse.urljoin(url, location), method="DELETE")) as r: deleted = r.status
    await pc.close()
    print(json.dumps({"status": status, "deleted": deleted}))
asyncio.run(main())
"""#

    func testPhoneOverWhipIsForwardedByteForByteOutsideTheCard() throws {
        let seconds = 8, pictures = seconds * 30
        let (dir, flv, port, assets) = try PassthroughTests.phoneScene(seconds: seconds)
        // The phone's H.264 as a sender hands it to RTP: Annex B, its parameter sets in band.
        _ = try CLI.shell(["ffmpeg", "-v", "error", "-y", "-i", flv, "-map", "0:v", "-c", "copy", "-bsf:v", "h264_mp4toannexb", dir + "/phone.ts"])
        CLI.write("""
            pipeline: whip-passthrough
            nodes:
              src:     {type: whip, url: "whip://127.0.0.1:\(port)", keys: [phone], idle: 4s, timeout: 2s}
              privacy: {type: privacy, in: src.video, image: \(assets)/privacy.png, schedule: [{at: 3s, for: 500ms}]}
              video:   {type: h264, in: privacy, passthrough: auto, preset: ultrafast, queue: {size: 60}}
              out:     {type: file, in: [video], path: out.mp4}
            """, to: dir + "/p.pipe")
        let run = try BackgroundRun(["run", dir + "/p.pipe", "--events", "json"], cwd: dir)
        addTeardownBlock { if run.process.isRunning { run.process.terminate() } }
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "listening" }, run.stderr)
        let result = try PythonWitness.run(Self.sender, ["http://127.0.0.1:\(port)/whip/phone", dir + "/phone.ts"]) as? [String: Any] ?? [:]
        XCTAssertEqual(result["status"] as? Int, 201)
        XCTAssertEqual(run.waitForExit(timeout: 30), 0, run.stderr)
        XCTAssertEqual(PassthroughTests.videoBytes(run, node: "src"), 0, "no picture was decoded")

        let account = try XCTUnwrap(run.events.first { $0["event"] as? String == "passthrough" }, "no passthrough event: \(run.stderr)")
        let encoded = account["encoded"] as? Int ?? 0
        print("whip passthrough: \(account)")
        let on = 120 - encoded
        XCTAssertTrue((88...92).contains(on), "the card from about 3 s to the phone's keyframe at 4 s: \(account)")
        let recording = dir + "/out.mp4"
        let video = try XCTUnwrap(CLI.stream(try CLI.probe(recording), "video"))
        XCTAssertEqual(video["width"] as? Int, 720)
        XCTAssertEqual(video["height"] as? Int, 1280)
        _ = try PassthroughTests.assertSpliced(recording, source: flv, switches: [(on, on + 15)], pictures: pictures)
        let sent = try PassthroughTests.packetHashes(flv), recorded = try PassthroughTests.packetHashes(recording)
        print("whip passthrough: \(zip(sent, recorded).filter { $0 == $1 }.count) of \(sent.count) packets the phone's byte for byte")
    }
}
