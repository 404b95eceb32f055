import AVGraph
import AVGraphTransport
import CFFmpeg

/// An SRT phone's pictures as MP4 and FLV carry them. MPEG-TS frames H.264 in Annex B; the
/// network source hands its pictures on as their packets (`h264 passthrough: auto`, pictures
/// decoded on request), which need NAL lengths with the parameter sets in an avcC record. So the
/// demuxer's video packets are repacked as they are read (`AvcRepacking`); the coded pictures are
/// not touched: what is forwarded is the phone's, byte for byte. (Its ADTS AAC is left as it is:
/// decoded, and encoded by `aac`.)
final class RepackingSource: PacketSource {
    private let inner: PacketSource
    private var video: (index: Int, repacking: AvcRepacking)

    /// `source` with its H.264 repacked when that is Annex B with its SPS and PPS known (what
    /// libavformat's MPEG-TS demuxer finds); else as it is.
    static func repacking(_ source: PacketSource) -> PacketSource {
        let video = source.bestStream(AVMEDIA_TYPE_VIDEO).flatMap { i in AvcRepacking(source.parameters(i), timeBase: source.timeBase(i)).map { (i, $0) } }
        guard let video else { return source }
        return RepackingSource(source, video: video)
    }

    private init(_ inner: PacketSource, video: (Int, AvcRepacking)) {
        self.inner = inner
        self.video = video
    }

    func bestStream(_ type: AVMediaType) -> Int? { inner.bestStream(type) }
    func parameters(_ stream: Int) -> UnsafePointer<AVCodecParameters> {
        if stream == video.index { return UnsafePointer(video.repacking.described.parameters) }
        return inner.parameters(stream)
    }
    func timeBase(_ stream: Int) -> Rational { inner.timeBase(stream) }
    var startedAt: Double? { inner.startedAt }
    func orientation(_ stream: Int) -> Orientation { inner.orientation(stream) }

    func read(into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool {
        guard try inner.read(into: packet) else { return false }
        if Int(packet.pointee.stream_index) == video.index { try video.repacking.repack(packet) }
        return true
    }
}

/// H.264 from Annex B to NAL lengths: each NAL unit behind a 4-byte length, the access unit
/// delimiters and the parameter sets left out, the stream declaring the sets as its avcC.
/// Parameter sets that change (a phone turned: a new size) replace those of their id, and the
/// packet carries the new record, as libavformat's FLV demuxer hands one on.
struct AvcRepacking {
    let described: EncodedStream
    private var configuration: AvcConfiguration
    static let lengthSize = 4

    init?(_ parameters: UnsafePointer<AVCodecParameters>, timeBase: Rational) {
        let stream = EncodedStream(copying: parameters, timeBase: timeBase, kind: .encodedVideo)
        let extradata = stream.extradata
        guard stream.codecName == "h264", extradata.first != 1, let avcC = AvcConfiguration(annexB: extradata),
              let described = try? stream.replacingExtradata(avcC.bytes) else { return nil }
        self.described = described
        configuration = avcC
    }

    mutating func repack(_ packet: UnsafeMutablePointer<AVPacket>) throws {
        let bytes = RepackedPacket.bytes(packet)
        // Already NAL lengths (no start code first): as it is.
        guard bytes.count > 4, bytes[0] == 0, bytes[1] == 0, bytes[2] == 1 || (bytes[2] == 0 && bytes[3] == 1) else { return }
        var sequenceSets: [[UInt8]] = [], pictureSets: [[UInt8]] = [], rest: [[UInt8]] = []
        for unit in AvcConfiguration.units(annexB: bytes[...]) {
            switch unit[0] & 0x1F {
            case 7: sequenceSets.append(unit)
            case 8: pictureSets.append(unit)
            case 9: continue
            default: rest.append(unit)
            }
        }
        var newRecord: [UInt8]?
        let updated = configuration.replacing(sequenceSets: sequenceSets, pictureSets: pictureSets)
        if updated != configuration {
            configuration = updated
            newRecord = updated.bytes
        }
        // A packet of parameter sets alone keeps them: an empty packet would read as the end.
        let units = rest.isEmpty ? sequenceSets + pictureSets : rest
        try RepackedPacket.replace(packet, with: AvcConfiguration.lengthPrefixed(units: units, lengthSize: Self.lengthSize), newExtradata: newRecord)
    }
}

extension AvcConfiguration {
    /// This record with `sequenceSets`/`pictureSets` in place of those of the same id (new ids
    /// added); the header follows the first SPS.
    func replacing(sequenceSets sps: [[UInt8]], pictureSets pps: [[UInt8]]) -> AvcConfiguration {
        var next = self
        for set in sps {
            let id = Self.id(ofSequenceSet: set)
            next.sequenceSets.removeAll { Self.id(ofSequenceSet: $0) == id }
            next.sequenceSets.append(set)
        }
        for set in pps {
            let id = Self.id(ofPictureSet: set)
            next.pictureSets.removeAll { Self.id(ofPictureSet: $0) == id }
            next.pictureSets.append(set)
        }
        // Sets already there, unchanged, keep their order (the record compares equal).
        if Set(next.sequenceSets) == Set(sequenceSets) && Set(next.pictureSets) == Set(pictureSets) { return self }
        if let first = next.sequenceSets.first, first.count >= 4 {
            (next.profile, next.compatibility, next.level) = (first[1], first[2], first[3])
        }
        return next
    }
}
