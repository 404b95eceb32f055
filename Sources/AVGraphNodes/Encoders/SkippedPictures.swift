import AVGraphTransport
/// `h264 passthrough`: a picture encoded again unchanged (the privacy card held on) written by
/// hand as an H.264 P picture whose every macroblock is skipped: a copy of the picture before
/// it, a dozen bytes, no encoder run. x264 spends ~4 ms on each picture of a still card at
/// 720x1280 (veryfast, zerolatency), so a card of a few seconds cost more CPU than forwarding all
/// the rest of a phone's stream. Written for the parameter sets passthrough opens x264 with:
/// CAVLC, picture order count type 2 (no B-frames), progressive; nil for any other.
struct SkippedPictures {
    private let pictureSetID: Int
    private let frameNumBits: Int
    private let macroblocks: Int
    private let weighted: Bool
    private let deblockingControl: Bool
    private let redundantCount: Bool
    private let nalLengthSize: Int
    /// `frame_num` of the last picture out (x264's or ours); nil until x264 gave one.
    private var frameNum: Int?

    init?(sps: [UInt8], pps: [UInt8], nalLengthSize: Int) {
        guard sps.first.map({ $0 & 0x1F == 7 }) == true, pps.first.map({ $0 & 0x1F == 8 }) == true else { return nil }
        var s = H264PictureSize.BitReader(unescaping: sps.dropFirst()[...])
        guard let profile = s.read(8), s.read(16) != nil, s.ue() != nil else { return nil }
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profile) {
            guard s.ue() == 1, s.ue() == 0, s.ue() == 0, s.read(1) != nil, s.read(1) == 0 else { return nil }  // 8-bit 4:2:0, no scaling lists
        }
        guard let log2FrameNum = s.ue(), s.ue() == 2, s.ue() != nil, s.read(1) != nil,
              let widthMbs = s.ue(), let heightMbs = s.ue(), s.read(1) == 1 else { return nil }
        var p = H264PictureSize.BitReader(unescaping: pps.dropFirst()[...])
        guard let id = p.ue(), p.ue() != nil, p.read(1) == 0, p.read(1) != nil, p.ue() == 0, p.ue() != nil, p.ue() != nil,
              let weighted = p.read(1), p.read(2) != nil, p.se() != nil, p.se() != nil, p.se() != nil,
              let deblocking = p.read(1), p.read(1) != nil, let redundant = p.read(1) else { return nil }
        pictureSetID = id
        frameNumBits = log2FrameNum + 4
        macroblocks = (widthMbs + 1) * (heightMbs + 1)
        self.weighted = weighted == 1
        deblockingControl = deblocking == 1
        redundantCount = redundant == 1
        self.nalLengthSize = nalLengthSize
    }

    /// Notes x264's picture (Annex B, as it comes): its `frame_num` is where ours continue.
    mutating func noteEncoded(annexB packet: ArraySlice<UInt8>) {
        frameNum = nil
        for unit in AvcConfiguration.units(annexB: packet) where [1, 5].contains(unit.first.map { $0 & 0x1F }) {
            var bits = H264PictureSize.BitReader(unescaping: unit.dropFirst().prefix(16))
            guard bits.ue() != nil, bits.ue() != nil, bits.ue() == pictureSetID, let n = bits.read(frameNumBits) else { return }
            frameNum = Int(n)
            return
        }
    }

    /// The next picture: every macroblock skipped (the picture before, shown again), framed with
    /// its NAL length as the track's packets are; nil while the last `frame_num` is not known.
    mutating func next() -> [UInt8]? {
        guard let last = frameNum else { return nil }
        let n = (last + 1) % (1 << frameNumBits)
        frameNum = n
        var w = BitWriter()
        w.ue(0)  // first_mb_in_slice
        w.ue(5)  // slice_type: P, as every slice of the picture
        w.ue(pictureSetID)
        w.bits(n, frameNumBits)
        if redundantCount { w.ue(0) }
        w.bits(1, 1)  // num_ref_idx_active_override_flag: one reference, the picture before
        w.ue(0)
        w.bits(0, 1)  // ref_pic_list_modification_flag_l0
        if weighted {
            w.ue(0)  // luma_log2_weight_denom
            w.ue(0)  // chroma_log2_weight_denom
            w.bits(0, 2)  // no luma or chroma weight for the reference
        }
        w.bits(0, 1)  // adaptive_ref_pic_marking_mode_flag: a reference like x264's P pictures, sliding window
        w.se(0)  // slice_qp_delta
        if deblockingControl { w.ue(1) }  // disable_deblocking_filter_idc: nothing to filter in a copy
        w.ue(macroblocks)  // mb_skip_run: all of them
        w.trailingBits()
        // nal_ref_idc 2 (a reference, as poc type 2 wants of consecutive pictures), type 1.
        let nal = [0x41] + w.escaped
        var out: [UInt8] = []
        for shift in stride(from: 8 * (nalLengthSize - 1), through: 0, by: -8) { out.append(UInt8((nal.count >> shift) & 0xFF)) }
        return out + nal
    }
}

/// Bits of an H.264 RBSP, most significant first, Exp-Golomb codes as the standard writes them.
private struct BitWriter {
    private var bytes: [UInt8] = []
    private var used = 8

    mutating func bits(_ value: Int, _ count: Int) {
        for i in stride(from: count - 1, through: 0, by: -1) {
            if used == 8 { bytes.append(0); used = 0 }
            bytes[bytes.count - 1] |= UInt8((value >> i) & 1) << (7 - used)
            used += 1
        }
    }

    mutating func ue(_ value: Int) {
        let code = value + 1
        let length = Int.bitWidth - code.leadingZeroBitCount
        bits(0, length - 1)
        bits(code, length)
    }

    mutating func se(_ value: Int) { ue(value > 0 ? 2 * value - 1 : -2 * value) }

    /// rbsp_stop_one_bit, then zeros to the byte's end.
    mutating func trailingBits() {
        bits(1, 1)
        if used < 8 { used = 8 }
    }

    /// The bytes with emulation prevention: no 00 00 0x (x <= 3) inside a NAL unit.
    var escaped: [UInt8] {
        var out: [UInt8] = []
        var zeros = 0
        for b in bytes {
            if zeros >= 2 && b <= 3 { out.append(3); zeros = 0 }
            out.append(b)
            zeros = b == 0 ? zeros + 1 : 0
        }
        return out
    }
}
