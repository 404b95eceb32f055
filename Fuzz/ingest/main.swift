@testable import AVGraphNodes
import AVGraph
import CFuzzDriver
import Foundation

/// libFuzzer target: bytes as the stream a producer writes to a `socket` source — 32-byte
/// headers (`IngestFraming.parse`), each followed by the payload it announces — delivered to an
/// `IngestHub` the way the socket source's reader does. A header refused ends the stream there,
/// as the reader drops the connection.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIngest(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let hub = IngestHub(videoCapacity: 2, audioCapacity: 0.1, policy: .oldest)
    var offset = 0
    while count - offset >= IngestFraming.headerSize {
        let header: IngestFraming.Header
        do { header = try IngestFraming.parse(UnsafeRawBufferPointer(start: bytes + offset, count: IngestFraming.headerSize)) } catch {
            _ = error.description
            break
        }
        offset += IngestFraming.headerSize
        guard count - offset >= header.payloadSize else { break }
        let payload = UnsafeRawPointer(bytes + offset)
        offset += header.payloadSize
        let time = Double(header.timestamp) / 1e6
        switch header.type {
        case .video:
            guard let format = PushPixelFormat(rawValue: header.format), let layout = PixelLayout(format.av) else { continue }
            var planes: [PlaneCopy.Plane] = []
            var planeOffset = 0
            for (rowBytes, rows) in PlaneCopy.packedPlaneSizes(layout: layout, width: header.a, height: header.b) {
                planes.append(PlaneCopy.Plane(base: payload + planeOffset, stride: rowBytes))
                planeOffset += rowBytes * rows
            }
            precondition(planeOffset <= header.payloadSize, "planes reach past the payload the header announced")
            _ = hub.pushVideo(format: format, width: header.a, height: header.b, planes: planes, time: time,
                              orientation: header.orientation, session: 1)
        case .app, .mic:
            guard let format = PushSampleFormat(rawValue: header.format) else { continue }
            _ = hub.pushAudio(pad: header.type == .app ? 1 : 2, bytes: payload, byteCount: header.payloadSize, format: format,
                              bigEndian: header.bigEndian, rate: header.a, channels: header.b, time: time, session: 1)
        case .end:
            hub.finish()
            return 0
        case .privacy:
            let card = header.payloadSize > 0 ? String(decoding: UnsafeRawBufferPointer(start: payload, count: header.payloadSize), as: UTF8.self) : nil
            _ = hub.pushPrivacy(on: header.a == 1, card: card, time: time)
        }
    }
    hub.finish()
    return 0
}

@_cdecl("FuzzIngest_main")
public func fuzzIngestMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzIngest($0!, $1) }
}
