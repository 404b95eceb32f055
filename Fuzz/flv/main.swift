@testable import AVGraphNodes
import AVGraph
import AVGraphTransport
import CFuzzDriver
import CFFmpeg
import Foundation

/// libFuzzer target: bytes as the FLV stream avgraph's RTMP server hands its reader (what an
/// admitted publisher sent, legacy and Enhanced RTMP alike), read by `FlvTagReader` in pieces of
/// varying size (the first byte picks them), as the publisher's stream delivers them: the header,
/// the probe, every tag to packets, sequence headers to extradata, data tags to `onData`. A seed
/// with H.264 and AAC (and HEVC as Enhanced RTMP) reaches the packet building.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFlv(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let piece = Int(bytes[0]) * 64 + 1
    var offset = 1
    let read: (UnsafeMutableRawBufferPointer) -> Int = { buffer in
        let n = min(piece, buffer.count, count - offset)
        guard n > 0 else { return 0 }
        buffer.baseAddress!.copyMemory(from: bytes + offset, byteCount: n)
        offset += n
        return n
    }
    let privacy = PrivacyTimeline()
    guard let reader = try? FlvTagReader(name: "fuzz", warn: { _ in }, onData: { name, values, timestamp in
        if name == InBandPrivacy.messageName { InBandPrivacy.apply(values, timestamp: timestamp, to: privacy) }
    }, read: read) else { return 0 }
    for type in [AVMEDIA_TYPE_VIDEO, AVMEDIA_TYPE_AUDIO] {
        if let s = reader.bestStream(type) {
            let p = reader.parameters(s).pointee
            precondition(p.extradata_size >= 0 && (p.extradata_size == 0 || p.extradata != nil), "extradata as its size says")
        }
    }
    var allocated = av_packet_alloc()
    defer { av_packet_free(&allocated) }
    guard let packet = allocated else { return 0 }
    while (try? reader.read(into: packet)) == true {
        precondition(packet.pointee.size >= 0 && (packet.pointee.size == 0 || packet.pointee.data != nil), "a packet's bytes as its size says")
        av_packet_unref(packet)
    }
    return 0
}

@_cdecl("FuzzFlv_main")
public func fuzzFlvMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzFlv($0!, $1) }
}
