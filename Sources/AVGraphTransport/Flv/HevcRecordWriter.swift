import Foundation

/// An HEVC decoder configuration record (`hvcC`, ISO 14496-15 8.3.3.1) made from Annex B
/// parameter sets (x265 with a global header gives its VPS, SPS and PPS so): the header's
/// profile, tier and level copied from the SPS's general profile_tier_level, its chroma format
/// and bit depths read from the SPS, NAL unit lengths of 4 bytes. What Enhanced RTMP's
/// SequenceStart carries (`RtmpLiveSession`); `HevcConfiguration` reads such a record.
package enum HevcRecordWriter {
    private enum UnitType {
        static let vps: UInt8 = 32, sps: UInt8 = 33, pps: UInt8 = 34
    }

    /// The record, or nil when `units` (NAL units without start codes) lack a VPS, SPS or PPS or the SPS cannot be read.
    package static func record(units: [[UInt8]]) -> [UInt8]? {
        func type(_ u: [UInt8]) -> UInt8 { u.first.map { $0 >> 1 & 0x3F } ?? 0xFF }
        let vps = units.filter { type($0) == UnitType.vps }, sps = units.filter { type($0) == UnitType.sps }
        let pps = units.filter { type($0) == UnitType.pps }
        guard !vps.isEmpty, let first = sps.first, !pps.isEmpty, let facts = read(sps: first) else { return nil }
        var out: [UInt8] = [1] + facts.generalProfileTierLevel
        out += [0xF0, 0x00]  // reserved, min_spatial_segmentation_idc 0
        out += [0xFC]  // reserved, parallelismType 0 (unknown)
        out += [0xFC | facts.chromaFormat, 0xF8 | facts.bitDepthLumaMinus8, 0xF8 | facts.bitDepthChromaMinus8]
        out += [0, 0]  // avgFrameRate unknown
        // constantFrameRate 0, numTemporalLayers, temporalIdNested, lengthSizeMinusOne 3.
        out.append(facts.temporalLayers << 3 | facts.temporalIdNested << 2 | 3)
        let arrays = [(UnitType.vps, vps), (UnitType.sps, sps), (UnitType.pps, pps)]
        out.append(UInt8(arrays.count))
        for (t, list) in arrays {
            out.append(0x80 | t)  // array_completeness: every set of the type is here
            out += [UInt8(list.count >> 8 & 0xFF), UInt8(list.count & 0xFF)]
            for u in list { out += [UInt8(u.count >> 8 & 0xFF), UInt8(u.count & 0xFF)] + u }
        }
        return out
    }

    private struct SequenceFacts {
        var generalProfileTierLevel: [UInt8]
        var chromaFormat: UInt8
        var bitDepthLumaMinus8: UInt8
        var bitDepthChromaMinus8: UInt8
        var temporalLayers: UInt8
        var temporalIdNested: UInt8
    }

    /// ITU-T H.265 7.3.2.2.1 up to the bit depths.
    private static func read(sps nal: [UInt8]) -> SequenceFacts? {
        var bits = H264PictureSize.BitReader(unescaping: nal.dropFirst(2).prefix(256))
        guard bits.read(4) != nil, let maxSubLayersMinus1 = bits.read(3), let nested = bits.read(1) else { return nil }
        var general: [UInt8] = []
        for _ in 0..<12 {
            guard let b = bits.read(8) else { return nil }
            general.append(UInt8(b))
        }
        let subLayers = Int(maxSubLayersMinus1)
        var present: [(profile: Bool, level: Bool)] = []
        for _ in 0..<subLayers {
            guard let p = bits.read(1), let l = bits.read(1) else { return nil }
            present.append((p == 1, l == 1))
        }
        if subLayers > 0 { for _ in subLayers..<8 { _ = bits.read(2) } }
        for p in present {
            if p.profile { for _ in 0..<11 { _ = bits.read(8) } }
            if p.level { _ = bits.read(8) }
        }
        guard bits.ue() != nil, let chroma = bits.ue(), chroma <= 3 else { return nil }
        if chroma == 3 { _ = bits.read(1) }
        _ = bits.ue()  // width
        _ = bits.ue()  // height
        if bits.read(1) == 1 { for _ in 0..<4 { _ = bits.ue() } }  // conformance window
        guard let luma = bits.ue(), let chromaDepth = bits.ue(), luma <= 7, chromaDepth <= 7 else { return nil }
        return SequenceFacts(generalProfileTierLevel: general, chromaFormat: UInt8(chroma), bitDepthLumaMinus8: UInt8(luma),
                             bitDepthChromaMinus8: UInt8(chromaDepth), temporalLayers: UInt8(subLayers + 1), temporalIdNested: UInt8(nested))
    }
}
