import AVGraph
import AVGraphTransport
import Foundation

/// A live session through libavformat's muxer (`NetworkMuxer`): a stream per input that delivered
/// media. srt:// writes into a libsrt socket of avgraph's own (`SrtCaller`); other schemes go
/// through libavformat's protocols.
final class MuxerLiveSession: LiveSession {
    private let muxer: NetworkMuxer
    private let indices: [Int?]

    init(url: String, format: String, timeout: Double, cancel: CancelFlag, protocolOptions: [String: String],
         muxerOptions: [String: String], streams: [EncodedStream?]) throws {
        let muxer = try url.lowercased().hasPrefix("srt://")
            ? SrtCaller.muxer(url: url, defaults: protocolOptions, format: format, timeout: timeout, cancel: cancel)
            : NetworkMuxer(url: url, format: format, timeout: timeout, cancel: cancel, protocolOptions: protocolOptions)
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
