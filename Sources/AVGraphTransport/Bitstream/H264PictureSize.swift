import Foundation

/// The picture size an H.264 sequence parameter set declares, read before any decoder sees the
/// stream: a publisher's size is judged against `max-size` from a few bytes, without
/// allocating a picture.
package enum H264PictureSize {
    /// Width and height (after cropping) of the SPS NAL unit `nal` (header byte included), or
    /// nil when it is not one or cannot be read.
    package static func of(sps nal: ArraySlice<UInt8>) -> (width: Int, height: Int)? {
        guard let header = nal.first, header & 0x1F == 7 else { return nil }
        var bits = BitReader(unescaping: nal.dropFirst().prefix(512))
        guard let profile = bits.read(8) else { return nil }
        _ = bits.read(16)  // constraint flags, level
        _ = bits.ue()  // sps id
        var chromaFormat = 1
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profile) {
            guard let c = bits.ue(), c <= 3 else { return nil }
            chromaFormat = c
            if c == 3 { _ = bits.read(1) }
            _ = bits.ue()
            _ = bits.ue()
            _ = bits.read(1)
            if bits.read(1) == 1 {
                for i in 0..<(c == 3 ? 12 : 8) where bits.read(1) == 1 {
                    var last = 8, next = 8
                    for _ in 0..<(i < 6 ? 16 : 64) where next != 0 {
                        guard let delta = bits.se() else { return nil }
                        next = (last + delta + 256) % 256
                        last = next == 0 ? last : next
                    }
                }
            }
        }
        _ = bits.ue()  // log2_max_frame_num
        guard let pocType = bits.ue() else { return nil }
        if pocType == 0 {
            _ = bits.ue()
        } else if pocType == 1 {
            _ = bits.read(1)
            _ = bits.se()
            _ = bits.se()
            guard let n = bits.ue(), n <= 255 else { return nil }
            for _ in 0..<n { _ = bits.se() }
        }
        _ = bits.ue()  // max_num_ref_frames
        _ = bits.read(1)
        guard let widthMbs = bits.ue(), let heightUnits = bits.ue(), let frameMbsOnly = bits.read(1) else { return nil }
        if frameMbsOnly == 0 { _ = bits.read(1) }
        _ = bits.read(1)
        var width = (widthMbs + 1) * 16
        var height = (heightUnits + 1) * 16 * (2 - Int(frameMbsOnly))
        if bits.read(1) == 1, let l = bits.ue(), let r = bits.ue(), let t = bits.ue(), let b = bits.ue() {
            let unitX = chromaFormat == 1 || chromaFormat == 2 ? 2 : 1
            let unitY = (chromaFormat == 1 ? 2 : 1) * (2 - Int(frameMbsOnly))
            width -= (l + r) * unitX
            height -= (t + b) * unitY
        }
        guard width > 0, height > 0 else { return nil }
        return (width, height)
    }

    /// Exp-Golomb bits of a NAL unit's payload, emulation prevention bytes removed (or of a
    /// bitstream without them: AV1's, VP9's).
    package struct BitReader {
        private var bytes: [UInt8] = []
        private var bit = 0

        package init(plain: ArraySlice<UInt8>) { bytes = Array(plain) }

        package init(unescaping raw: ArraySlice<UInt8>) {
            var zeros = 0
            for b in raw {
                if zeros >= 2 && b == 3 { zeros = 0; continue }
                zeros = b == 0 ? zeros + 1 : 0
                bytes.append(b)
            }
        }

        package mutating func read(_ n: Int) -> UInt32? {
            guard bit + n <= bytes.count * 8 else { return nil }
            var v: UInt32 = 0
            for _ in 0..<n {
                v = v << 1 | UInt32(bytes[bit >> 3] >> (7 - UInt8(bit & 7)) & 1)
                bit += 1
            }
            return v
        }

        package mutating func ue() -> Int? {
            var zeros = 0
            while true {
                guard let b = read(1) else { return nil }
                if b == 1 { break }
                zeros += 1
                if zeros > 31 { return nil }
            }
            guard let rest = read(zeros) else { return nil }
            return (1 << zeros) - 1 + Int(rest)
        }

        package mutating func se() -> Int? {
            guard let k = ue() else { return nil }
            return k % 2 == 1 ? (k + 1) / 2 : -(k / 2)
        }
    }
}
