import AVGraph
import AVGraphTransport
import CFFmpeg
import Synchronization

/// A network source's H.264 and HEVC pictures decoded only when a node asks for their pixels: when no
/// node downstream reads every picture (`NodeSetup.pixelsOnRequest`: a privacy node before an
/// encoder that forwards the source's packets), decoding every picture would cost the most CPU
/// of the whole recording and be thrown away. The session's packets are kept from each keyframe
/// on (a `Run`, held by the pictures made from it); a picture asked for is decoded from its run's
/// keyframe up to itself, and the decoder stays there, so pictures asked for in order (an encoder
/// covering a span) each cost one decode. One thread at a time decodes, whichever asks.
final class PicturesOnRequest: Sendable {
    /// The packets of one keyframe and the pictures after it, in decode order, as they came.
    final class Run: PictureDecoding {
        let owner: PicturesOnRequest
        /// The keyframe's place in the session's decode order (`SourcePicture.sequence`).
        let first: Int
        let configuration: SourceConfiguration
        let packets = Mutex<[Packet]>([])

        init(owner: PicturesOnRequest, first: Int, configuration: SourceConfiguration) {
            self.owner = owner
            self.first = first
            self.configuration = configuration
        }

        func decode(_ picture: SourcePicture) throws -> Frame { try owner.decode(picture, in: self) }
    }

    private struct Position: ~Copyable {
        var decoder: Decoder?
        var configuration: SourceConfiguration?
        weak var run: Run?
        /// Packets of `run` the decoder has taken.
        var taken = 0
    }

    private let stream: EncodedStream
    private let maxPixels: Int
    private let position = Mutex(Position())

    init(stream: EncodedStream, maxPixels: Int) {
        self.stream = stream
        self.maxPixels = maxPixels
    }

    /// Whether pictures of `stream` can wait to be decoded: H.264 in an avcC record or HEVC in an
    /// hvcC record, of 8-bit 4:2:0 (what the pending picture's format says before any pixel is
    /// decoded; a phone's profiles: H.264 baseline/main/high, HEVC Main).
    static func takes(_ stream: EncodedStream) -> Bool {
        let record = stream.extradata
        switch stream.codecName {
        case "h264":
            guard record.count >= 7, record[0] == 1 else { return false }
            return [66, 77, 88, 100].contains(record[1])
        case "hevc":
            // general_profile_idc Main (1), chroma_format_idc 4:2:0, 8-bit luma and chroma.
            guard record.count >= 23, record[0] == 1 else { return false }
            return record[1] & 0x1F == 1 && record[16] & 3 == 1 && record[17] & 7 == 0 && record[18] & 7 == 0
        default:
            return false
        }
    }

    /// The codec of a stream `takes` took, as the size readers name it.
    static func codec(of stream: EncodedStream) -> FlvVideoCodec { stream.codecName == "hevc" ? .hevc : .h264 }

    /// Whether a length-prefixed packet holds a picture (a coded slice), not only parameter sets or SEI.
    static func isPicture(_ av: UnsafePointer<AVPacket>, nalLengthSize n: Int, codec: FlvVideoCodec) -> Bool {
        LengthPrefixedUnits(av, lengthSize: n).contains { unit in
            let header = unit.first!
            return codec == .hevc ? (header >> 1) & 0x3F < 32 : (1...5).contains(header & 0x1F)
        }
    }

    private func decode(_ picture: SourcePicture, in run: Run) throws -> Frame {
        try position.withLock { p in
            if let done = picture.decodedPicture { return done }
            let index = picture.sequence - run.first
            guard index >= 0, index < run.packets.withLock({ $0.count }) else {
                throw MediaError("picture \(picture.sequence) is not among its keyframe's packets")
            }
            if p.run !== run || p.taken > index || p.decoder == nil {
                // Back to the run's keyframe: another run, or a picture the decoder went past.
                if p.decoder == nil || p.configuration != run.configuration {
                    let described = try stream.replacingExtradata(run.configuration.bytes)
                    p.decoder = try Decoder(parameters: described.parameters, timeBase: stream.timeBase, threads: 1, maxPixels: maxPixels,
                                            lowDelay: true)
                    p.configuration = run.configuration
                } else {
                    p.decoder!.reset()
                }
                p.run = run
                p.taken = 0
            }
            let decoder = p.decoder!
            // Only the packets the decoder has not taken: pictures asked for in order take one each.
            let taken = p.taken
            let pending = run.packets.withLock { Array($0[taken...]) }
            // Pictures come out as their packets go in (no reordering, low delay); should one be
            // held back anyway, the packets after it go in until it comes.
            for packet in pending {
                try decoder.send(packet.av)
                p.taken += 1
                while let av = try decoder.receive() {
                    let frame = Frame(owning: av, timeBase: stream.timeBase)
                    if av.pointee.pts == picture.packet.pts {
                        picture.decodedPicture = frame
                        return frame
                    }
                }
            }
            p.decoder = nil
            throw MediaError("the source's picture at \(picture.packet.pts) did not decode (damaged?)")
        }
    }
}
