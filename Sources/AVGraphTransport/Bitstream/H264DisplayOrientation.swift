import AVGraph
import CFFmpeg

/// The orientation an H.264 display orientation SEI (payload type 47) in a packet declares, read
/// from the bytes as FFmpeg's decoder reads it, so that a picture sent on undecoded carries the
/// tag its decoded picture would (an `orient` whose tag is carried as a display matrix needs no pixels).
package enum H264DisplayOrientation {
    /// The orientation of the packet's last display orientation SEI; nil when it has none, or one
    /// that cancels or says nothing (the decoder then attaches no matrix: the one before holds).
    /// Only SEI NAL units are copied out of the packet (a few bytes), never the picture.
    package static func of(_ av: UnsafePointer<AVPacket>, nalLengthSize n: Int) -> Orientation? {
        var found: Orientation?
        for unit in LengthPrefixedUnits(av, lengthSize: n) where unit.first! & 0x1F == 6 {
            if let o = of(sei: Array(unit.dropFirst())[...]) { found = o }
        }
        return found
    }

    /// Walks the SEI messages of one SEI NAL unit's payload (header byte excluded).
    private static func of(sei payload: ArraySlice<UInt8>) -> Orientation? {
        var bits = H264PictureSize.BitReader(unescaping: payload)
        var found: Orientation?
        func number() -> Int? {
            var value = 0
            while let byte = bits.read(8) {
                value += Int(byte)
                if byte != 0xFF { return value }
            }
            return nil
        }
        // Each message: its type, its size in bytes, its payload; the trailing bits end the list.
        while let type = number(), let size = number() {
            var payloadBits = bits
            for _ in 0..<size { guard bits.read(8) != nil else { return found } }
            guard type == 47, payloadBits.read(1) == 0, let h = payloadBits.read(1), let v = payloadBits.read(1),
                  let rotation = payloadBits.read(16), h == 1 || v == 1 || rotation != 0 else { continue }
            let matrix = Orientation.displayMatrix(anticlockwiseDegrees: Double(rotation) * 360 / 65536, hflip: h == 1, vflip: v == 1)
            found = matrix.withUnsafeBytes { Orientation(displayMatrix: $0.baseAddress!) }
        }
        return found
    }
}
