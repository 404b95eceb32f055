import AVGraph
import Foundation

/// A live session through libavformat (`NetworkMuxer`): a muxer's stream per input that delivered media.
final class MuxerLiveSession: LiveSession {
    private let muxer: NetworkMuxer
    private let indices: [Int?]

    init(url: String, format: String, timeout: Double, cancel: CancelFlag, protocolOptions: [String: String],
         muxerOptions: [String: String], streams: [EncodedStream?]) throws {
        let muxer = try NetworkMuxer(url: url, format: format, timeout: timeout, cancel: cancel, protocolOptions: protocolOptions)
        var indices: [Int?] = []
        for s in streams {
            indices.append(try s.map { try muxer.addStream($0.parameters, timeBase: $0.timeBase) })
        }
        try muxer.writeHeader(options: muxerOptions)
        self.muxer = muxer
        self.indices = indices
    }

    var uplinkSocket: UplinkSocket? { muxer.uplinkSocket }

    func write(_ packet: Packet, input: Int) throws {
        guard let index = indices[input] else { return }
        try muxer.write(packet.av, timeBase: packet.timeBase, stream: index)
    }

    func finish() throws { try muxer.finish() }

    func close() { muxer.close() }
}
