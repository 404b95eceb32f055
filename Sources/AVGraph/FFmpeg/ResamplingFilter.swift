import Foundation

/// The taps of a one-dimensional resampling filter in the fixed point the scale-and-turn kernel
/// uses: for output k, `taps` Q14 coefficients applied to inputs `positions[k]`, `positions[k] + 1`, ...
/// Inputs past either end repeat the edge sample (their weight joins the edge tap), so every
/// window lies inside the input.
public struct ResamplingFilter: Sendable {
    /// The interpolation kernels `resize` offers, as swscale defines them (bicubic: B = 0, C = 0.6).
    public enum Kernel: Sendable {
        case bilinear, bicubic, lanczos

        /// How far the kernel reaches, in input samples at scale 1.
        var radius: Double {
            switch self {
            case .bilinear: return 1
            case .bicubic: return 2
            case .lanczos: return 3
            }
        }

        func weight(_ x: Double) -> Double {
            let d = abs(x)
            switch self {
            case .bilinear:
                return max(0, 1 - d)
            case .bicubic:
                let c = 0.6
                if d < 1 { return ((12 - 6 * c) * d * d * d + (-18 + 6 * c) * d * d + 6) / 6 }
                if d < 2 { return (-6 * c * d * d * d + 30 * c * d * d - 48 * c * d + 24 * c) / 6 }
                return 0
            case .lanczos:
                if d < 1e-9 { return 1 }
                if d >= 3 { return 0 }
                let p = Double.pi * d
                return 3 * sin(p) * sin(p / 3) / (p * p)
            }
        }
    }

    public let taps: Int
    public let positions: [Int32]
    public let coefficients: [Int16]

    /// Output k's centre falls on input coordinate `centers[k]` (input sample i's centre is i);
    /// `spread` input samples pass per output sample (above 1: the kernel widens, as a
    /// downscale must, to keep what it drops from aliasing). The coefficients of each output sum
    /// to `gain` (a range conversion folded into the filter).
    public init(kernel: Kernel, inputCount: Int, centers: [Double], spread: Double, gain: Double = 1) {
        let scale = max(spread, 1)
        let reach = kernel.radius * scale
        let last = inputCount - 1
        let windows = centers.map { t -> (lo: Int, hi: Int) in
            (Int((t - reach).rounded(.down)) + 1, Int((t + reach).rounded(.up)) - 1)
        }
        // Clamped to the input, a window spans at most inputCount samples.
        let width = windows.map { min($0.hi, last) - max($0.lo, 0) + 1 }.max() ?? 1
        let taps = max(1, min(width, inputCount))
        var positions = [Int32](repeating: 0, count: centers.count)
        var coefficients = [Int16](repeating: 0, count: centers.count * taps)
        var weights = [Double](repeating: 0, count: taps)
        for (k, t) in centers.enumerated() {
            let (lo, hi) = windows[k]
            let start = max(0, min(max(lo, 0), inputCount - taps))
            for j in weights.indices { weights[j] = 0 }
            for i in lo...max(lo, hi) {
                weights[min(max(i, 0), last) - start] += kernel.weight((Double(i) - t) / scale)
            }
            let sum = weights.reduce(0, +)
            // A window of zero weight (never for these kernels) keeps the nearest sample.
            if abs(sum) < 1e-12 { weights[min(max(Int(t.rounded()), 0), last) - start] = 1 }
            let total = abs(sum) < 1e-12 ? 1 : sum
            // Rounded so the coefficients add up to exactly gain * 2^14: a flat area stays flat.
            let one = (gain * 16384).rounded()
            var q = weights.map { Int(($0 / total * gain * 16384).rounded()) }
            let error = Int(one) - q.reduce(0, +)
            if let big = q.indices.max(by: { abs(q[$0]) < abs(q[$1]) }) { q[big] += error }
            positions[k] = Int32(start)
            for j in 0..<taps { coefficients[k * taps + j] = Int16(clamping: q[j]) }
        }
        self.taps = taps
        self.positions = positions
        self.coefficients = coefficients
    }

    /// The filter of one axis of a plane scaled from `inputLength` to `outputLength` picture
    /// (luma) samples, the plane subsampled by 2^`shift`. `inputSiting`/`outputSiting`: where a
    /// chroma sample's centre lies in its pair of luma samples, in luma samples from the pair's
    /// edge (0.5: on the first, as H.264's default "left" has it across; 1: between the two; 1.5:
    /// on the second); `mirrored`: output 0 is at the input's far end.
    public static func axis(kernel: Kernel, inputLength: Int, outputLength: Int, shift: Int,
                            inputSiting: Double, outputSiting: Double, mirrored: Bool, gain: Double = 1) -> ResamplingFilter {
        let step = Double(1 << shift)
        func phase(_ siting: Double) -> Double { shift == 0 ? 0.5 : siting }
        let inputCount = -((-inputLength) >> shift), outputCount = -((-outputLength) >> shift)
        let ratio = Double(inputLength) / Double(outputLength)
        let centers = (0..<outputCount).map { k -> Double in
            let u = Double(k) * step + phase(outputSiting)
            let v = mirrored ? Double(inputLength) - u * ratio : u * ratio
            return (v - phase(inputSiting)) / step
        }
        return ResamplingFilter(kernel: kernel, inputCount: inputCount, centers: centers, spread: ratio, gain: gain)
    }
}
