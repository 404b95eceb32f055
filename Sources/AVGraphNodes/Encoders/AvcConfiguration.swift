import AVGraphTransport
/// An H.264 decoder configuration record (`avcC`, ISO 14496-15), as MP4 and FLV carry it: the
/// sequence and picture parameter sets a decoder needs before the first picture. Two encoders'
/// records merge into one when their parameter set ids differ, so one track can hold pictures
/// of either: what lets a recording splice our own pictures between a phone's.
struct AvcConfiguration: Equatable {
    var profile: UInt8
    var compatibility: UInt8
    var level: UInt8
    /// Bytes of each NAL unit's length prefix in the packets (1, 2 or 4).
    var lengthSize: Int
    var sequenceSets: [[UInt8]]
    var pictureSets: [[UInt8]]
    /// What follows the parameter sets (High profiles: chroma format and bit depths).
    var trailer: [UInt8]

    /// Reads a record; nil when `bytes` is not one (Annex B extradata, another codec's record).
    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 7, bytes[0] == 1 else { return nil }
        profile = bytes[1]
        compatibility = bytes[2]
        level = bytes[3]
        lengthSize = Int(bytes[4] & 3) + 1
        var at = 6
        func sets(count: Int) -> [[UInt8]]? {
            var found: [[UInt8]] = []
            for _ in 0..<count {
                guard at + 2 <= bytes.count else { return nil }
                let size = Int(bytes[at]) << 8 | Int(bytes[at + 1])
                at += 2
                guard size > 0, at + size <= bytes.count else { return nil }
                found.append(Array(bytes[at..<at + size]))
                at += size
            }
            return found
        }
        guard let sps = sets(count: Int(bytes[5] & 0x1F)), at < bytes.count else { return nil }
        let ppsCount = Int(bytes[at])
        at += 1
        guard let pps = sets(count: ppsCount) else { return nil }
        sequenceSets = sps
        pictureSets = pps
        trailer = Array(bytes[at...])
    }

    /// The parameter sets of Annex B extradata (start codes, what libx264 gives), under the
    /// header of the first SPS, NAL lengths of 4 bytes.
    init?(annexB: [UInt8]) {
        let units = Self.units(annexB: annexB[...])
        let sps = units.filter { $0.first.map { $0 & 0x1F == 7 } == true }
        let pps = units.filter { $0.first.map { $0 & 0x1F == 8 } == true }
        guard let first = sps.first, first.count >= 4, !pps.isEmpty else { return nil }
        profile = first[1]
        compatibility = first[2]
        level = first[3]
        lengthSize = 4
        sequenceSets = sps
        pictureSets = pps
        trailer = []
    }

    /// The NAL units of an Annex B byte stream, without their start codes.
    static func units(annexB bytes: ArraySlice<UInt8>) -> [[UInt8]] {
        var units: [[UInt8]] = []
        var start: Int?
        var i = bytes.startIndex
        func close(at end: Int) {
            guard let s = start else { return }
            var e = end
            // A 4-byte start code's leading zero (and trailing_zero_8bits) belong to no unit.
            while e > s && bytes[e - 1] == 0 { e -= 1 }
            if e > s { units.append(Array(bytes[s..<e])) }
        }
        while i + 2 < bytes.endIndex {
            if bytes[i] == 0 && bytes[i + 1] == 0 && bytes[i + 2] == 1 {
                close(at: i)
                i += 3
                start = i
            } else {
                i += 1
            }
        }
        close(at: bytes.endIndex)
        return units
    }

    /// An Annex B access unit (an encoder's packet) as MP4 and FLV carry pictures: each NAL unit
    /// behind its length in `lengthSize` bytes.
    static func lengthPrefixed(annexB bytes: ArraySlice<UInt8>, lengthSize: Int) -> [UInt8] {
        lengthPrefixed(units: units(annexB: bytes), lengthSize: lengthSize)
    }

    /// NAL units each behind its length in `lengthSize` bytes.
    static func lengthPrefixed(units: [[UInt8]], lengthSize: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(units.reduce(0) { $0 + $1.count + lengthSize })
        for unit in units {
            for shift in stride(from: 8 * (lengthSize - 1), through: 0, by: -8) { out.append(UInt8((unit.count >> shift) & 0xFF)) }
            out += unit
        }
        return out
    }

    /// The parameter sets as a picture carries them in band (SPS, then PPS, each behind its
    /// length in `lengthSize` bytes): what goes before a keyframe whose sequence the header lacks.
    var inBand: [UInt8] { Self.lengthPrefixed(units: sequenceSets + pictureSets, lengthSize: lengthSize) }

    var bytes: [UInt8] {
        var out: [UInt8] = [1, profile, compatibility, level, 0xFC | UInt8(lengthSize - 1), 0xE0 | UInt8(sequenceSets.count)]
        func append(_ nal: [UInt8]) {
            out += [UInt8(nal.count >> 8), UInt8(nal.count & 0xFF)]
            out += nal
        }
        sequenceSets.forEach(append)
        out.append(UInt8(pictureSets.count))
        pictureSets.forEach(append)
        return out + trailer
    }

    /// The ids the parameter sets take (an SPS's and a PPS's id spaces are separate).
    var sequenceIDs: Set<Int> { Set(sequenceSets.compactMap { Self.id(ofSequenceSet: $0) }) }
    var pictureIDs: Set<Int> { Set(pictureSets.compactMap { Self.id(ofPictureSet: $0) }) }

    static func id(ofSequenceSet nal: [UInt8]) -> Int? {
        guard let header = nal.first, header & 0x1F == 7 else { return nil }
        var bits = H264PictureSize.BitReader(unescaping: nal.dropFirst().prefix(16))
        _ = bits.read(24)  // profile, constraint flags, level
        return bits.ue()
    }

    static func id(ofPictureSet nal: [UInt8]) -> Int? {
        guard let header = nal.first, header & 0x1F == 8 else { return nil }
        var bits = H264PictureSize.BitReader(unescaping: nal.dropFirst().prefix(16))
        return bits.ue()
    }

    /// The smallest id free in both spaces (x264 gives its SPS and PPS the same one), 0...31.
    func freeID() -> Int? { (0...31).first { !sequenceIDs.contains($0) && !pictureIDs.contains($0) } }

    /// This record with `other`'s parameter sets added, when a decoder can take both: the same
    /// NAL length size and no id taken twice. The header (profile, level) stays this record's.
    func merged(with other: AvcConfiguration) -> AvcConfiguration? {
        guard lengthSize == other.lengthSize, sequenceIDs.isDisjoint(with: other.sequenceIDs),
              pictureIDs.isDisjoint(with: other.pictureIDs),
              sequenceSets.count + other.sequenceSets.count <= 31, pictureSets.count + other.pictureSets.count <= 255 else { return nil }
        var m = self
        m.sequenceSets += other.sequenceSets
        m.pictureSets += other.pictureSets
        return m
    }
}
