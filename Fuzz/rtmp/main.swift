@testable import AVGraphNodes
import AVGraph
import AVGraphTransport
import CFuzzDriver
import Foundation

/// libFuzzer target: bytes as what a peer sends to avgraph's RTMP listener — handshake, chunk
/// stream, AMF0 commands and data, audio and video messages — fed to one `RtmpConnection` in
/// pieces of varying size (the first byte picks them), as reads from a socket would deliver
/// them. A seed with a valid handshake and publish reaches the FLV and the bounds checks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRtmp(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let keys = try! PublisherKeys(keys: ["phone"], file: nil, environment: [:], urlKey: nil)
    let privacy = PrivacyTimeline()
    let policy = RtmpPolicy(app: "live", keys: keys, maxWidth: 3840, maxHeight: 2160, maxRate: 120, onData: { name, values, timestamp in
        if name == InBandPrivacy.messageName { InBandPrivacy.apply(values, timestamp: timestamp, to: privacy) }
    })
    let connection = RtmpConnection(policy: policy)
    let piece = Int(bytes[0]) * 16 + 1
    var offset = 1
    while offset < count && connection.phase != .ended {
        let n = min(piece, count - offset)
        connection.receive(UnsafeRawBufferPointer(start: bytes + offset, count: n))
        connection.acknowledgeIfDue()
        offset += n
        connection.output.removeAll(keepingCapacity: true)
        precondition(connection.flv.isEmpty || connection.admitted, "FLV only from an admitted publisher")
        connection.flv.removeAll(keepingCapacity: true)
    }
    // The SPS reader on its own: the same bytes as a NAL unit.
    _ = H264PictureSize.of(sps: [0x67] + UnsafeBufferPointer(start: bytes, count: min(count, 600)))
    return 0
}

@_cdecl("FuzzRtmp_main")
public func fuzzRtmpMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzRtmp($0!, $1) }
}
