import AVGraph
import AVGraphTransport
import CFFmpeg
import Foundation

extension NetworkReader {
    /// Frame threads per decoder: a few, so a large stream cannot multiply the pictures in flight.
    static let decoderThreads = min(4, max(1, ProcessInfo.processInfo.activeProcessorCount))

    /// The next publisher's stream, demuxed, with the peer's address: from avgraph's own server
    /// (waiting for an admitted publisher; nil once stopped), or libavformat opening the URL.
    /// A stream whose pictures are over `max-size` is refused here, before a decoder sees it.
    /// The RTMP server's FLV is read by avgraph's own tag reader (Enhanced RTMP, HEVC as codec
    /// id 12), SRT's MPEG-TS by libavformat.
    func open(_ options: [String: String]) throws -> (PacketSource, String, PublisherStream?)? {
        guard let listener = input.listener else {
            let demuxer = try Demuxer(url: input.url, format: input.format, options: options, cancel: cancel, redacted: shownURL)
            try checkSize(demuxer, peer: nil)
            // libavformat does not tell an SRT caller's address; pulling, the peer is the server.
            return (RepackingSource.repacking(demuxer), input.listen ? "unknown" : shownURL, nil)
        }
        guard let stream = listener.next() else { return nil }
        do {
            let read: (UnsafeMutableRawBufferPointer) -> Int = { [cancel] buffer in cancel.isCancelled ? 0 : stream.read(into: buffer) }
            let format = stream.format ?? input.format ?? "flv"
            let demuxer: PacketSource = switch format {
            case "flv": try FlvTagReader(name: stream.peer, warn: { [weak self] in self?.note(.warning($0)) }, onData: inBandPrivacy, read: read)
            // A WHIP publisher's units, already depacketized and on one timeline.
            case WebRtcMediaFraming.format: RepackingSource.repacking(try WebRtcMediaReader(name: stream.peer, read: read))
            default: RepackingSource.repacking(try Demuxer(format: format, name: "\(stream.peer)", cancel: cancel, read: read))
            }
            try checkSize(demuxer, peer: stream.peer)
            return (demuxer, stream.peer, stream)
        } catch {
            stream.abandon()
            throw error
        }
    }

    /// `onPrivacy` data tags onto the source's privacy timeline, when they come in the stream.
    private var inBandPrivacy: ((String, [Amf0Value], UInt32) -> Void)? {
        guard input.privacyInTags else { return nil }
        let privacy = input.privacy
        return { name, values, timestamp in
            if name == InBandPrivacy.messageName { InBandPrivacy.apply(values, timestamp: timestamp, to: privacy) }
        }
    }

    private func checkSize(_ demuxer: PacketSource, peer: String?) throws {
        guard let v = demuxer.bestStream(AVMEDIA_TYPE_VIDEO) else { return }
        let par = demuxer.parameters(v).pointee
        let max = input.maxSize
        if par.width > max.width || par.height > max.height {
            throw MediaError("\(peer ?? shownURL): refused: \(par.width)x\(par.height) pictures are over max-size \(max.width)x\(max.height)")
        }
    }
}
