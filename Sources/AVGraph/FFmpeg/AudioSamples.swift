import CFFmpeg
import Foundation

/// Reads and writes the samples of an audio frame in any FFmpeg sample format as Doubles in
/// -1...1 (writes clip), and measures levels: what meters, duckers and tests need without a
/// conversion pass.
public struct AudioSamples {
    public let frame: Frame
    public let format: AVSampleFormat
    public let planar: Bool
    public let channels: Int

    public init(_ frame: Frame) {
        self.frame = frame
        format = av_get_packed_sample_fmt(frame.sampleFormat)
        planar = frame.isPlanarAudio
        channels = frame.channels
    }

    public var count: Int { frame.sampleCount }

    public func value(channel c: Int, index i: Int) -> Double {
        let p = frame.audioData(planar ? c : 0)
        let k = planar ? i : i * channels + c
        switch format {
        case AV_SAMPLE_FMT_U8: return (Double(p.load(fromByteOffset: k, as: UInt8.self)) - 128) / 128
        case AV_SAMPLE_FMT_S16: return Double(p.assumingMemoryBound(to: Int16.self)[k]) / 32768
        case AV_SAMPLE_FMT_S32: return Double(p.assumingMemoryBound(to: Int32.self)[k]) / 2_147_483_648
        case AV_SAMPLE_FMT_S64: return Double(p.assumingMemoryBound(to: Int64.self)[k]) / 9.223372036854775808e18
        case AV_SAMPLE_FMT_FLT: return Double(p.assumingMemoryBound(to: Float.self)[k])
        case AV_SAMPLE_FMT_DBL: return p.assumingMemoryBound(to: Double.self)[k]
        default: return 0
        }
    }

    /// Writes one sample (the frame must be writable: `Frame.makeWritable()`).
    public func set(channel c: Int, index i: Int, _ x: Double) {
        let p = frame.audioData(planar ? c : 0)
        let k = planar ? i : i * channels + c
        let v = max(-1, min(1, x))
        switch format {
        case AV_SAMPLE_FMT_U8: p.storeBytes(of: UInt8(max(0, min(255, (v * 128 + 128).rounded()))), toByteOffset: k, as: UInt8.self)
        case AV_SAMPLE_FMT_S16: p.assumingMemoryBound(to: Int16.self)[k] = Int16(max(-32768, min(32767, (v * 32768).rounded())))
        case AV_SAMPLE_FMT_S32: p.assumingMemoryBound(to: Int32.self)[k] = Int32(max(-2_147_483_648, min(2_147_483_647, (v * 2_147_483_648).rounded())))
        case AV_SAMPLE_FMT_S64: p.assumingMemoryBound(to: Int64.self)[k] = Int64(max(-9.2233720368547e18, min(9.2233720368547e18, v * 9.223372036854775808e18)))
        case AV_SAMPLE_FMT_FLT: p.assumingMemoryBound(to: Float.self)[k] = Float(x)
        case AV_SAMPLE_FMT_DBL: p.assumingMemoryBound(to: Double.self)[k] = x
        default: break
        }
    }

    /// Root mean square over every channel of samples `range`.
    public func rms(_ range: Range<Int>? = nil) -> Double {
        let r = range ?? 0..<count
        guard !r.isEmpty, channels > 0 else { return 0 }
        var sum = 0.0
        for c in 0..<channels { for i in r { let x = value(channel: c, index: i); sum += x * x } }
        return sqrt(sum / Double(r.count * channels))
    }

    /// A linear level in dBFS, with silence at `floor`.
    public static func dBFS(_ x: Double, floor: Double = -120) -> Double { x > 0 ? max(floor, 20 * log10(x)) : floor }
}
