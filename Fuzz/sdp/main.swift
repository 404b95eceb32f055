import AVGraphTransport
import CFuzzDriver
import Foundation

/// libFuzzer target: bytes as the SDP offer a WHIP client (or a WHEP viewer) posts, parsed (`SessionDescription`)
/// and answered (`WebRtcAnswer`); an answer avgraph writes must parse again, with the codecs it
/// chose. Nothing may trap or hang, whatever the lines, lengths and numbers.
let local = WebRtcAnswer.Local(ufrag: "fuzz", password: "fuzz-password-0123456789", fingerprint: "AB:CD", candidates: [("127.0.0.1", 8189)])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSdp(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    guard let offer = try? SessionDescription.parse(text) else { return 0 }
    // As a WHEP viewer's offer: the sending answer parses again, one format per section it fills.
    if let sending = try? WhepAnswer(offer: offer, local: local, sessionID: 1, sending: [.init(kind: "video", codec: "h264", ssrc: 1, profileLevelID: "640028"),
                                                                                        .init(kind: "audio", codec: "opus", ssrc: 2)], streamName: "fuzz") {
        guard let back = try? SessionDescription.parse(sending.sdp) else { preconditionFailure("avgraph's WHEP answer does not parse: \(sending.sdp)") }
        precondition(back.media.filter { $0.port != 0 }.map(\.formats) == sending.chosen.map { [$0.payloadType] }, "the WHEP answer's formats are not what it chose")
    }
    guard let answer = try? WebRtcAnswer(offer: offer, local: local, sessionID: 1) else { return 0 }
    guard let back = try? SessionDescription.parse(answer.sdp) else { preconditionFailure("avgraph's answer does not parse: \(answer.sdp)") }
    let formats = back.media.filter { $0.port != 0 }.map(\.formats)
    precondition(formats == answer.chosen.map { [$0.payloadType] }, "the answer's formats are not the codecs it chose")
    return 0
}

@_cdecl("FuzzSdp_main")
public func fuzzSdpMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzSdp($0!, $1) }
}
