import AVGraphTransport
/// An HEVC decoder configuration record (`hvcC`, ISO 14496-15 8.3.3), as MP4 and Enhanced RTMP
/// carry it: the VPS, SPS and PPS a decoder needs before the first picture, and the size of the
/// NAL unit lengths in the pictures. x265 numbers its parameter sets 0, as phones do, so the two
/// encoders' sets cannot stand side by side in one record (as H.264's can, `AvcConfiguration`):
/// `h265 passthrough: auto` sends each encoder's sets in band instead, before its keyframes.
struct HevcConfiguration: Equatable {
    /// Bytes of each NAL unit's length prefix in the packets (1, 2 or 4).
    var lengthSize: Int
    /// The NAL units of the record's arrays (VPS, SPS, PPS, maybe SEI), in the record's order.
    var parameterSets: [[UInt8]]

    /// Reads a record; nil when `bytes` is not one (Annex B extradata, another codec's record).
    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 23, bytes[0] == 1, bytes[21] & 3 != 2 else { return nil }
        lengthSize = Int(bytes[21] & 3) + 1
        var units: [[UInt8]] = []
        var at = 23
        func u16() -> Int? {
            guard at + 2 <= bytes.count else { return nil }
            defer { at += 2 }
            return Int(bytes[at]) << 8 | Int(bytes[at + 1])
        }
        for _ in 0..<bytes[22] {
            at += 1  // array_completeness, NAL unit type: each unit's own header says it again
            guard let count = u16() else { return nil }
            for _ in 0..<count {
                guard let size = u16(), size > 0, at + size <= bytes.count else { return nil }
                units.append(Array(bytes[at..<at + size]))
                at += size
            }
        }
        parameterSets = units
    }

    /// HEVC NAL unit types avgraph looks at (ITU-T H.265 table 7-1).
    enum UnitType {
        static let cleanRandomAccess = 21
        static let endOfSequence = 36
        /// Types below this one are coded slices (pictures).
        static let firstNonPicture = 32
    }

    static func type(ofUnitHeader byte: UInt8) -> Int { Int(byte >> 1) & 0x3F }

    /// What goes before a source keyframe the recording returns to after pictures of ours: the
    /// source's parameter sets again (ours replaced them: the same ids), and, before a CRA, an
    /// end of sequence, which makes the CRA start a new coded video sequence (no RASL picture
    /// follows without B-frames, but only a new sequence may switch its SPS), as a keyframe
    /// after ours must. Each unit behind its length, as the packet's own.
    func resumption(before keyframe: ArraySlice<UInt8>) -> [UInt8] {
        var units = parameterSets
        if Self.firstPictureType(keyframe, lengthSize: lengthSize) == UnitType.cleanRandomAccess {
            units.insert([UInt8(UnitType.endOfSequence << 1), 1], at: 0)
        }
        let annexB: [UInt8] = units.flatMap { [0, 0, 0, 1] + $0 }
        return AvcConfiguration.lengthPrefixed(annexB: annexB[...], lengthSize: lengthSize)
    }

    /// The NAL unit type of a length-prefixed picture's first coded slice.
    static func firstPictureType(_ bytes: ArraySlice<UInt8>, lengthSize: Int) -> Int? {
        LengthPrefixedUnits(bytes, lengthSize: lengthSize).lazy.map { Self.type(ofUnitHeader: $0.first!) }
            .first { $0 < UnitType.firstNonPicture }
    }
}
