import CFFmpeg

/// An exact ratio, as FFmpeg uses for time bases and frame rates.
public struct Rational: Hashable, Sendable, CustomStringConvertible {
    public var num: Int
    public var den: Int

    public init(_ num: Int, _ den: Int) {
        self.num = num
        self.den = den
    }

    public init(_ av: AVRational) { self.init(Int(av.num), Int(av.den)) }

    public var av: AVRational { AVRational(num: Int32(num), den: Int32(den)) }
    public var double: Double { den == 0 ? 0 : Double(num) / Double(den) }
    public var inverse: Rational { Rational(den, num) }
    public var description: String { den == 1 ? "\(num)" : "\(num)/\(den)" }

    /// Rescales `value` from time base `from` to time base `to`, rounding to nearest.
    public static func rescale(_ value: Int64, from: Rational, to: Rational) -> Int64 {
        av_rescale_q(value, from.av, to.av)
    }
}
