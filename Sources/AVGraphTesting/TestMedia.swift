import AVGraph
import CFFmpeg
import Foundation

/// Media made on demand for node tests (the harness's companions): flat pictures, gradients, tones.
public enum TestMedia {
    /// A picture of `width`x`height` in `pixelFormat`, every pixel from `luma(x, y)` with neutral chroma.
    public static func videoFrame(width: Int, height: Int, pixelFormat: String = "yuv420p", pts: Int64 = 0,
                                  timeBase: Rational = Rational(1, 30), orientation: Orientation = .up,
                                  luma: (Int, Int) -> UInt8 = { _, _ in 128 }) throws -> Frame {
        let f = Frame(timeBase: timeBase)
        let fmt = av_get_pix_fmt(pixelFormat)
        guard fmt != AV_PIX_FMT_NONE else { throw MediaError("unknown pixel format \(pixelFormat)") }
        f.av.pointee.format = fmt.rawValue
        f.av.pointee.width = Int32(width)
        f.av.pointee.height = Int32(height)
        try AVFailure.check(av_frame_get_buffer(f.av, 0), "av_frame_get_buffer")
        f.pts = pts
        f.av.pointee.pkt_duration = 1
        f.orientation = orientation
        f.av.pointee.color_range = AVCOL_RANGE_MPEG
        f.av.pointee.colorspace = AVCOL_SPC_BT709
        f.av.pointee.color_primaries = AVCOL_PRI_BT709
        f.av.pointee.color_trc = AVCOL_TRC_BT709
        guard let y = f.plane(0) else { throw MediaError("no luma plane") }
        let ls = f.lineSize(0)
        for row in 0..<height { for x in 0..<width { y[row * ls + x] = luma(x, row) } }
        switch pixelFormat {
        case "nv12":
            if let uv = f.plane(1) { for row in 0..<(height + 1) / 2 { memset(uv + row * f.lineSize(1), 128, (width + 1) / 2 * 2) } }
        case "gray": break
        default:
            for p in 1...2 { if let c = f.plane(p) { for row in 0..<(height + 1) / 2 { memset(c + row * f.lineSize(p), 128, (width + 1) / 2) } } }
        }
        return f
    }

    /// A block of a sine tone as planar float (`fltp`), pts = first sample's index.
    public static func tone(freq: Double, amplitude: Double = 0.25, rate: Int = 48000, channels: Int = 1,
                            firstSample: Int64 = 0, count: Int = 1024) throws -> Frame {
        let f = Frame(timeBase: Rational(1, rate))
        f.av.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
        f.av.pointee.sample_rate = Int32(rate)
        f.av.pointee.nb_samples = Int32(count)
        av_channel_layout_default(&f.av.pointee.ch_layout, Int32(channels))
        try AVFailure.check(av_frame_get_buffer(f.av, 0), "av_frame_get_buffer")
        f.pts = firstSample
        for c in 0..<channels {
            guard let p = f.plane(c) else { continue }
            p.withMemoryRebound(to: Float.self, capacity: count) { s in
                for i in 0..<count {
                    s[i] = Float(amplitude * sin(2 * .pi * freq * Double(firstSample + Int64(i)) / Double(rate)))
                }
            }
        }
        return f
    }

    /// `seconds` of a tone at `dBFS` (peak) cut into blocks of `block` samples, starting at `start` seconds.
    public static func toneBlocks(freq: Double, dBFS: Double, seconds: Double, start: Double = 0, rate: Int = 48000,
                                  channels: Int = 1, block: Int = 1024) throws -> [Frame] {
        let amplitude = dBFS <= -200 ? 0 : pow(10, dBFS / 20)
        let first = Int64((start * Double(rate)).rounded()), total = Int((seconds * Double(rate)).rounded())
        return try stride(from: 0, to: total, by: block).map { i in
            try tone(freq: freq, amplitude: amplitude, rate: rate, channels: channels, firstSample: first + Int64(i), count: min(block, total - i))
        }
    }

    /// RMS level in dBFS of `samples` (silence gives -120).
    public static func dBFS<C: Collection>(_ samples: C) -> Double where C.Element == Double {
        guard !samples.isEmpty else { return -120 }
        return AudioSamples.dBFS(sqrt(samples.reduce(0) { $0 + $1 * $1 } / Double(samples.count)))
    }
}
