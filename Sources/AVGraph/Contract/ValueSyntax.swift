import Foundation

/// Parsers for the value syntax of docs/PIPE-FORMAT.md. Each returns nil when the text does not
/// fit; the caller turns that into a diagnostic that shows the expected form.
public enum ValueSyntax {
    /// `1280x720`
    public static func size(_ s: String) -> (width: Int, height: Int)? {
        let parts = s.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
        return (w, h)
    }

    /// `30`, `29.97`, `30000/1001`. Numerator and denominator stay within FFmpeg's 32-bit
    /// `AVRational`; a decimal is kept to a thousandth and must be below `maxRate`.
    public static func rate(_ s: String) -> Rational? {
        if let slash = s.firstIndex(of: "/") {
            guard let n = Int(s[..<slash]), let d = Int(s[s.index(after: slash)...]), n > 0, d > 0 else { return nil }
            let r = reduced(n, d)
            if r.num <= Int(Int32.max), r.den <= Int(Int32.max) { return r }
            // Too fine for an AVRational: the nearest thousandth, as a decimal would give.
            return rate(String(Double(n) / Double(d)))
        }
        if let n = Int(s) { return n > 0 && n < Int(maxRate) ? Rational(n, 1) : nil }
        guard let x = Double(s), x > 0, x.isFinite, x < maxRate else { return nil }
        for (ntsc, r) in [(23.976, Rational(24000, 1001)), (29.97, Rational(30000, 1001)), (59.94, Rational(60000, 1001))]
        where abs(x - ntsc) < 0.001 {
            return r
        }
        let r = reduced(Int((x * 1000).rounded()), 1000)
        return r.num > 0 ? r : nil
    }

    /// No rate a `.pipe` file means reaches this; above it the text is not turned into a number
    /// (`Int(1e16 * 1000)` would trap) and the option's range check reports it.
    public static let maxRate = 1e9

    static func reduced(_ n: Int, _ d: Int) -> Rational {
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        let g = max(gcd(n, d), 1)
        return Rational(n / g, d / g)
    }

    private static func number(withSuffixes s: String, _ suffixes: [(String, Double)]) -> Double? {
        let t = s.trimmingCharacters(in: .whitespaces)
        for (suffix, scale) in suffixes where t.hasSuffix(suffix) {
            let body = t.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)
            guard let v = Double(body), v.isFinite else { return nil }
            return v * scale
        }
        guard let v = Double(t), v.isFinite else { return nil }
        return v
    }

    /// `2500k`, `2.5M`, `128000` -> bits per second.
    public static func bitrate(_ s: String) -> Int? {
        guard let v = number(withSuffixes: s, [("k", 1e3), ("K", 1e3), ("M", 1e6), ("m", 1e6)]), v >= 0, v < 1e12 else { return nil }
        return Int(v.rounded())
    }

    /// `60s`, `1.5s`, `500ms`, `2m`, `1h`, or a plain number of seconds.
    public static func duration(_ s: String) -> Double? {
        guard let v = number(withSuffixes: s, [("ms", 1e-3), ("us", 1e-6), ("s", 1), ("m", 60), ("h", 3600)]), v >= 0, v < 1e9
        else { return nil }
        return v
    }

    /// `-6dB` or a linear factor `0.5` -> linear factor.
    public static func gain(_ s: String) -> Double? {
        let t = s.trimmingCharacters(in: .whitespaces)
        if t.lowercased().hasSuffix("db") {
            guard let db = Double(t.dropLast(2).trimmingCharacters(in: .whitespaces)), db.isFinite, db <= 60 else { return nil }
            return pow(10, db / 20)
        }
        // The same ceiling as in dB: +60 dB is a factor of 1000.
        guard let v = Double(t), v >= 0, v <= 1000 else { return nil }
        return v
    }

    /// `50MB`, `64MiB`, `512kB`, `1GB`, or bytes.
    public static func byteSize(_ s: String) -> Int? {
        let units: [(String, Double)] = [
            ("KiB", 1024), ("MiB", 1_048_576), ("GiB", 1_073_741_824),
            ("kB", 1e3), ("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("B", 1),
        ]
        guard let v = number(withSuffixes: s, units), v >= 0, v < 1e13 else { return nil }
        return Int(v.rounded())
    }

    public static let colorNames: [String: (UInt8, UInt8, UInt8)] = [
        "black": (0, 0, 0), "white": (255, 255, 255), "gray": (128, 128, 128), "grey": (128, 128, 128),
        "red": (255, 0, 0), "green": (0, 128, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
    ]

    /// `black`, `#202020`, `#fff`
    public static func color(_ s: String) -> RGB? {
        if let named = colorNames[s.lowercased()] { return RGB(r: named.0, g: named.1, b: named.2) }
        guard s.hasPrefix("#") else { return nil }
        var hex = String(s.dropFirst())
        if hex.count == 3 { hex = hex.map { "\($0)\($0)" }.joined() }
        guard hex.count == 6, let v = UInt32(hex, radix: 16) else { return nil }
        return RGB(r: UInt8(v >> 16 & 0xff), g: UInt8(v >> 8 & 0xff), b: UInt8(v & 0xff))
    }
}

public struct RGB: Sendable, Equatable {
    public var r: UInt8, g: UInt8, b: UInt8
    public init(r: UInt8, g: UInt8, b: UInt8) { self.r = r; self.g = g; self.b = b }

    /// BT.709 limited-range Y, Cb, Cr.
    public var yuv709: (y: UInt8, u: UInt8, v: UInt8) {
        let R = Double(r) / 255, G = Double(g) / 255, B = Double(b) / 255
        let y = 0.2126 * R + 0.7152 * G + 0.0722 * B
        let u = (B - y) / 1.8556, v = (R - y) / 1.5748
        func c(_ x: Double) -> UInt8 { UInt8(max(0, min(255, x.rounded()))) }
        return (c(16 + 219 * y), c(128 + 224 * u), c(128 + 224 * v))
    }
}
