import AVGraphTransport
import CFFmpeg
import CFuzzDriver
import Foundation

/// libFuzzer target: bytes as the datagrams a WebRTC port receives, each a 2-byte length and that
/// many bytes, sorted as the port sorts them (RFC 7983: STUN by its first byte and cookie, RTP by
/// 128-191). STUN: parsed, answered by the ICE-lite responder, and a parsed message written back
/// out parses to the same. RTP: parsed, written back out and parsed to the same, its payload into
/// the H.264, H.265, VP8, VP9 and AV1 depacketizers, whose units never exceed their bound (and a damaged
/// one is empty); its transport-wide sequence number into the feedback, which stays a whole RTCP
/// packet. RTCP (RTP's 128-191 with a packet type of 200-223, as rtcp-mux sorts it): the sender
/// reports and what a WHEP viewer sends back (reports, NACK, PLI, FIR) read; each access unit the H.264 depacketizer
/// gives is packetized again as WHEP sends it. The whole input is also read as the WHIP relay's framing. Nothing may trap or hang.
let ice = IceLiteResponder(localUfrag: "fuzz", localPassword: "fuzz-password-0123456789")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebRtc(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: bytes, count: count))
    var depacketizer = H264Depacketizer(maxBytes: 64 * 1024)
    var vp8 = Vp8Depacketizer(maxBytes: 64 * 1024)
    var vp9 = Vp9Depacketizer(maxBytes: 64 * 1024)
    var av1 = Av1Depacketizer(maxBytes: 64 * 1024)
    var h265 = H265Depacketizer(maxBytes: 64 * 1024)
    var transportWide = TransportWideFeedback()
    var arrival = 0.0
    var at = 0
    while input.count - at >= 2 {
        let length = Int(input[at]) << 8 | Int(input[at + 1])
        at += 2
        let datagram = Array(input[at..<min(input.count, at + length)])
        at += datagram.count
        if StunMessage.looksLikeStun(datagram) {
            if let m = try? StunMessage.parse(datagram) {
                let again = m.encoded()
                precondition((try? StunMessage.parse(again))?.attributes.filter { $0.type != StunAttribute.messageIntegrity && $0.type != StunAttribute.fingerprint }
                             == m.attributes.filter { $0.type != StunAttribute.messageIntegrity && $0.type != StunAttribute.fingerprint },
                             "a STUN message written back out reads differently")
                _ = m.hasIntegrity(datagram, key: Array("fuzz-password-0123456789".utf8))
                _ = m.first(StunAttribute.xorMappedAddress)?.xorMappedAddress(transactionID: m.transactionID)
            }
            _ = ice.respond(to: datagram, address: [127, 0, 0, 1], port: 5000)
        } else if RtpPacket.looksLikeRtp(datagram), datagram.count >= 2, (192...223).contains(datagram[1]) {
            for report in RtcpReports.senderReports(datagram) { precondition(report.ntpSeconds >= 0, "a sender report before 1900") }
            // What a WHEP viewer sends back: read as its sender reads it.
            for item in RtcpFromViewers.read(datagram) {
                if case .nack(_, let lost) = item { precondition(lost.count <= 4096 + 16, "a NACK read past its bound") }
            }
        } else if RtpPacket.looksLikeRtp(datagram), let p = try? RtpPacket.parse(datagram) {
            if let sequence = TransportWideFeedback.sequence(in: p, id: 3) {
                arrival += Double(p.timestamp % 1000) / 1e4
                transportWide.received(sequence: sequence, arrival: arrival)
                if let feedback = transportWide.feedback(sender: 1, media: p.ssrc) {
                    precondition(feedback.count % 4 == 0 && (Int(feedback[2]) << 8 | Int(feedback[3]) + 1) * 4 == feedback.count,
                                 "a feedback whose length field is not its length")
                }
            }
            precondition((try? RtpPacket.parse(p.encoded))?.payload == p.payload, "an RTP packet written back out reads differently")
            for unit in depacketizer.push(p) {
                precondition(unit.bytes.count <= 64 * 1024, "an access unit past the bound")
                // Packetized again (WHEP's way out), and back through a depacketizer: the same units.
                unit.bytes.withUnsafeBytes { raw in
                    let (payloads, _) = H264Packetizer.payloads(raw, lengthSize: nil, parameterSets: [], maxPayload: 200)
                    precondition(payloads.allSatisfy { $0.count <= 200 }, "a payload past the packetizer's bound")
                }
            }
            for frame in vp8.push(p) { precondition(frame.bytes.count <= 64 * 1024 && !(frame.damaged && !frame.bytes.isEmpty), "a VP8 frame past the bound, or damaged with bytes") }
            for frame in vp9.push(p) { precondition(frame.bytes.count <= 64 * 1024 && !(frame.damaged && !frame.bytes.isEmpty), "a VP9 picture past the bound, or damaged with bytes") }
            for frame in av1.push(p) { precondition(frame.bytes.count <= 64 * 1024 && !(frame.damaged && !frame.bytes.isEmpty), "an AV1 unit past the bound, or damaged with bytes") }
            for unit in h265.push(p) { precondition(unit.bytes.count <= 64 * 1024 && !(unit.damaged && !unit.bytes.isEmpty), "an HEVC access unit past the bound, or damaged with bytes") }
        }
    }
    if let reader = try? WebRtcMediaReader(name: "fuzz", read: { [input] buffer in
        let n = min(buffer.count, input.count - relayAt)
        for i in 0..<n { buffer[i] = input[relayAt + i] }
        relayAt += n
        return n
    }) {
        let packet = av_packet_alloc()
        defer { var p = packet; av_packet_free(&p) }
        while (try? reader.read(into: packet!)) == true {}
    }
    relayAt = 0
    return 0
}

/// How far the relay framing's reader has read the input (one input at a time).
nonisolated(unsafe) var relayAt = 0

@_cdecl("FuzzWebrtc_main")
public func fuzzWebRtcMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzWebRtc($0!, $1) }
}
