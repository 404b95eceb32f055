import Foundation

/// The picture sizes a video stream's own headers declare, read before any decoder sees it: the
/// SPS of H.264 and HEVC, AV1's sequence header OBU, a VP9 keyframe's header. From a
/// configuration record (what a sequence start carries) or from coded frames (headers in band).
package enum VideoSequenceSize {
    package typealias Size = (width: Int, height: Int)

    /// Bytes of each NAL unit's length in coded frames, as an avcC or hvcC record says.
    package static func nalLengthSize(_ codec: FlvVideoCodec, config c: ArraySlice<UInt8>) -> Int? {
        let i = c.startIndex
        switch codec {
        case .h264 where c.count >= 5: return Int(c[i + 4] & 3) + 1
        case .hevc where c.count >= 22: return Int(c[i + 21] & 3) + 1
        default: return nil
        }
    }

    /// Sizes in a configuration record: avcC's and hvcC's SPS, av1C's sequence header OBU.
    package static func of(_ codec: FlvVideoCodec, config c: ArraySlice<UInt8>) -> [Size] {
        var units: [ArraySlice<UInt8>] = []
        var i = c.startIndex
        func list(count: Int) {
            for _ in 0..<count {
                guard i + 2 <= c.endIndex else { return }
                let n = Int(c[i]) << 8 | Int(c[i + 1])
                guard i + 2 + n <= c.endIndex else { return }
                units.append(c[i + 2..<i + 2 + n])
                i += 2 + n
            }
        }
        switch codec {
        case .h264:
            guard c.count >= 6 else { return [] }
            i += 6
            list(count: Int(c[c.startIndex + 5] & 0x1F))
            return units.compactMap { H264PictureSize.of(sps: $0) }
        case .hevc:
            guard c.count >= 23 else { return [] }
            let arrays = Int(c[i + 22])
            i += 23
            for _ in 0..<arrays {
                guard i + 3 <= c.endIndex else { break }
                let count = Int(c[i + 1]) << 8 | Int(c[i + 2])
                i += 3
                list(count: count)
            }
            return units.compactMap { hevc(sps: $0) }
        case .av1:
            return c.count > 4 ? av1(obus: c.dropFirst(4)) : []
        case .vp9:
            // vpcC says no size; the first keyframe does.
            return []
        }
    }

    /// Sizes declared in band in one message's coded frames.
    package static func of(_ codec: FlvVideoCodec, frames p: ArraySlice<UInt8>, nalLengthSize: Int) -> [Size] {
        switch codec {
        case .h264, .hevc:
            return LengthPrefixedUnits(p, lengthSize: nalLengthSize).compactMap { unit in
                codec == .h264 ? H264PictureSize.of(sps: unit) : hevc(sps: unit)
            }
        case .av1: return av1(obus: p)
        case .vp9: return vp9(frame: p).map { [$0] } ?? []
        }
    }

    /// Width and height (after the conformance window) of an HEVC SPS NAL unit (2-byte header included).
    package static func hevc(sps nal: ArraySlice<UInt8>) -> Size? {
        guard nal.count > 3, nal[nal.startIndex] >> 1 & 0x3F == 33 else { return nil }
        var bits = H264PictureSize.BitReader(unescaping: nal.dropFirst(2).prefix(512))
        _ = bits.read(4)  // vps id
        guard let layers = bits.read(3) else { return nil }
        let subLayers = Int(layers)
        _ = bits.read(1)
        // profile_tier_level: the general profile (88 bits) and level (8), then the sub-layers'.
        _ = bits.read(32); _ = bits.read(32); _ = bits.read(24); _ = bits.read(8)
        var profilePresent: [Bool] = [], levelPresent: [Bool] = []
        for _ in 0..<subLayers {
            profilePresent.append(bits.read(1) == 1)
            levelPresent.append(bits.read(1) == 1)
        }
        if subLayers > 0 { for _ in subLayers..<8 { _ = bits.read(2) } }
        for k in 0..<subLayers {
            if profilePresent[k] { _ = bits.read(32); _ = bits.read(32); _ = bits.read(24) }
            if levelPresent[k] { _ = bits.read(8) }
        }
        _ = bits.ue()  // sps id
        guard let chroma = bits.ue(), chroma <= 3 else { return nil }
        var separatePlanes = false
        if chroma == 3 { separatePlanes = bits.read(1) == 1 }
        guard var width = bits.ue(), var height = bits.ue(), let window = bits.read(1) else { return nil }
        if window == 1, let l = bits.ue(), let r = bits.ue(), let t = bits.ue(), let b = bits.ue() {
            let unitX = !separatePlanes && (chroma == 1 || chroma == 2) ? 2 : 1
            let unitY = !separatePlanes && chroma == 1 ? 2 : 1
            width -= (l + r) * unitX
            height -= (t + b) * unitY
        }
        guard width > 0, height > 0 else { return nil }
        return (width, height)
    }

    /// The largest picture the sequence header OBUs among `obus` (AV1's low-overhead format) allow.
    package static func av1(obus p: ArraySlice<UInt8>) -> [Size] {
        var sizes: [Size] = []
        var i = p.startIndex
        while i < p.endIndex {
            let header = p[i]
            let type = header >> 3 & 0x0F
            var j = i + 1 + (header & 0x04 != 0 ? 1 : 0)
            var size = p.endIndex - j
            if header & 0x02 != 0 {
                // leb128
                size = 0
                for k in 0..<8 {
                    guard j < p.endIndex else { return sizes }
                    let b = p[j]
                    j += 1
                    size |= Int(b & 0x7F) << (7 * k)
                    if b & 0x80 == 0 { break }
                }
            }
            guard size >= 0, j + size <= p.endIndex else { return sizes }
            if type == 1, let s = av1SequenceHeader(p[j..<j + size]) { sizes.append(s) }
            i = j + size
        }
        return sizes
    }

    private static func av1SequenceHeader(_ payload: ArraySlice<UInt8>) -> Size? {
        var bits = H264PictureSize.BitReader(plain: payload.prefix(256))
        _ = bits.read(3)  // profile
        _ = bits.read(1)  // still picture
        guard let reduced = bits.read(1) else { return nil }
        if reduced == 1 {
            _ = bits.read(5)
        } else {
            var decoderModel = false
            var delayLength = 0
            if bits.read(1) == 1 {  // timing info
                _ = bits.read(32); _ = bits.read(32)
                if bits.read(1) == 1 {  // equal picture interval: uvlc
                    var zeros = 0
                    while bits.read(1) == 0 {
                        zeros += 1
                        if zeros >= 32 { return nil }
                    }
                    _ = bits.read(zeros)
                }
                if bits.read(1) == 1 {
                    decoderModel = true
                    delayLength = Int(bits.read(5) ?? 0) + 1
                    _ = bits.read(32); _ = bits.read(5); _ = bits.read(5)
                }
            }
            let initialDelay = bits.read(1) == 1
            guard let points = bits.read(5) else { return nil }
            for _ in 0...points {
                _ = bits.read(12)
                if (bits.read(5) ?? 0) > 7 { _ = bits.read(1) }
                if decoderModel, bits.read(1) == 1 {
                    _ = bits.read(delayLength); _ = bits.read(delayLength); _ = bits.read(1)
                }
                if initialDelay, bits.read(1) == 1 { _ = bits.read(4) }
            }
        }
        guard let wBits = bits.read(4), let hBits = bits.read(4),
              let w = bits.read(Int(wBits) + 1), let h = bits.read(Int(hBits) + 1) else { return nil }
        return (Int(w) + 1, Int(h) + 1)
    }

    /// The size a VP9 keyframe's uncompressed header declares (nil for other frames).
    package static func vp9(frame p: ArraySlice<UInt8>) -> Size? {
        var bits = H264PictureSize.BitReader(plain: p.prefix(32))
        guard bits.read(2) == 2, let low = bits.read(1), let high = bits.read(1) else { return nil }
        let profile = high << 1 | low
        if profile == 3 { _ = bits.read(1) }
        guard bits.read(1) == 0, bits.read(1) == 0 else { return nil }  // a shown existing frame; not a keyframe
        _ = bits.read(2)  // show frame, error resilient
        guard bits.read(24) == 0x49_8342 else { return nil }
        if profile >= 2 { _ = bits.read(1) }
        let colorSpace = bits.read(3)
        if colorSpace != 7 {
            _ = bits.read(1)
            if profile == 1 || profile == 3 { _ = bits.read(3) }
        } else if profile == 1 || profile == 3 {
            _ = bits.read(1)
        }
        guard let w = bits.read(16), let h = bits.read(16) else { return nil }
        return (Int(w) + 1, Int(h) + 1)
    }
}
