import AVGraph
import AVGraphTransport
import Foundation

/// A live session through avgraph's own RTMP client: each input's packets as FLV tags (H.264
/// and AAC as legacy FLV, HEVC as Enhanced RTMP) on an `RtmpClient`. The metadata and the
/// sequence headers go first, stamped with the session's first media time; a packet that
/// carries new extradata (a passthrough's phone turned) sends a new sequence header before it.
final class RtmpLiveSession: LiveSession {
    private enum Track {
        /// `annexB`: the encoder's packets carry start codes (its extradata did), converted to lengths.
        case video(FlvVideoCodec, record: [UInt8], annexB: Bool)
        case audio(config: [UInt8]?)
        case none
    }

    private let client: RtmpClient
    private var tracks: [Track] = []
    private let streams: [EncodedStream?]
    /// Milliseconds taken off every time so none is negative (an encoder's first decode times).
    private var base: Int64?

    /// Errors are the run's under the sink's name (the runtime says it): none names the node again.
    init(url: String, streams: [EncodedStream?], timeout: Double, trustedCertificates: String?, cancel: CancelFlag) throws {
        let address: RtmpAddress
        do { address = try RtmpAddress(url) } catch { throw LiveSessionRefused(description: "'\(Redaction.url(url))': \(error)") }
        self.streams = streams
        // The records are checked before connecting: a stream RTMP cannot carry is no network error.
        var described: [Track] = []
        for s in streams {
            guard let s else { described.append(.none); continue }
            switch s.codecName {
            case "h264": described.append(.video(.h264, record: try FlvRecords.avc(s.extradata), annexB: s.extradata.first != 1))
            case "hevc": described.append(.video(.hevc, record: try FlvRecords.hevc(s.extradata), annexB: s.extradata.first != 1))
            case "aac": described.append(.audio(config: s.extradata.isEmpty ? nil : s.extradata))
            default: throw LiveSessionRefused(description: "RTMP carries H.264, HEVC and AAC here, not \(s.codecName)")
            }
        }
        client = try RtmpClient(address, options: RtmpClient.Options(timeout: timeout, trustedCertificates: trustedCertificates), cancel: cancel)
        for case .video(let codec, _, _) in described where codec == .hevc && !client.serverTakes(codec.rawValue) {
            client.close()
            throw LiveSessionRefused(description: "the server at \(Redaction.url(url)) lists the codecs it takes (Enhanced RTMP's fourCcList) "
                                     + "without hvc1: it cannot take HEVC; encode with h264 for it")
        }
        tracks = described
    }

    var uplinkSocket: UplinkSocket? { .tcp(client.probe) }

    func write(_ packet: Packet, input: Int) throws {
        let ms = packet.decodeMilliseconds
        if base == nil {
            base = min(ms, 0)
            try start(at: UInt32(clamping: ms - base!))
        }
        let time = UInt32(clamping: max(0, ms - base!))
        switch tracks[input] {
        case .video(let codec, let record, let annexB):
            if let fresh = packet.newExtradata {
                let next = codec == .h264 ? try FlvRecords.avc(fresh) : try FlvRecords.hevc(fresh)
                if next != record {
                    tracks[input] = .video(codec, record: next, annexB: annexB)
                    try client.send(type: 9, timestamp: time, payload: FlvTagWriter.videoSequenceStart(codec, record: next))
                }
            }
            let units = annexB ? FlvRecords.lengthPrefixed(annexB: packet.bytes) : Array(packet.bytes)
            try client.send(type: 9, timestamp: time, payload: FlvTagWriter.videoFrame(
                codec, units: units, key: packet.isKeyframe, compositionTime: Int32(clamping: packet.compositionMilliseconds)))
        case .audio(let config):
            let bytes = packet.bytes
            if config == nil, let fromHeader = FlvTagWriter.aacConfig(adts: bytes) {
                // An encoder without a global header: its ADTS headers say what the sequence header must.
                tracks[input] = .audio(config: fromHeader)
                try client.send(type: 8, timestamp: time, payload: FlvTagWriter.aacSequenceStart(config: fromHeader))
            }
            try client.send(type: 8, timestamp: time, payload: FlvTagWriter.aacFrame(FlvTagWriter.rawAac(bytes)))
        case .none: return
        }
    }

    /// The metadata and each stream's sequence header, at the session's first media time.
    private func start(at time: UInt32) throws {
        var video: (codec: FlvVideoCodec, width: Int, height: Int, frameRate: Double)?
        var audio: (sampleRate: Int, channels: Int)?
        for (track, stream) in zip(tracks, streams) {
            guard let stream else { continue }
            switch track {
            case .video(let codec, _, _): video = (codec, stream.pictureSize.width, stream.pictureSize.height, 0)
            case .audio: audio = stream.audioShape
            case .none: break
            }
        }
        try client.send(type: 18, timestamp: time, payload: FlvTagWriter.metadata(video: video, audio: audio))
        for track in tracks {
            switch track {
            case .video(let codec, let record, _): try client.send(type: 9, timestamp: time, payload: FlvTagWriter.videoSequenceStart(codec, record: record))
            case .audio(let config?): try client.send(type: 8, timestamp: time, payload: FlvTagWriter.aacSequenceStart(config: config))
            default: break
            }
        }
    }

    func finish() throws { try client.finish() }

    func close() { client.close() }
}
