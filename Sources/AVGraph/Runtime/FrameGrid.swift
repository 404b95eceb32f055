/// The frame periods of a pipeline's video, as one grid: the shortest span that is a whole
/// number of every period (1/30 s for 30 fps; 1/5 s for 25 and 30 fps together). A cut in the
/// timeline that is a multiple of it keeps every stream's frames where `fps` and the encoders
/// put them, so it never adds half a frame between a picture and its sound.
struct FrameGrid: Sendable {
    /// Seconds; 0 when the pipeline has no video rate (or rates with no common grid under a second).
    let period: Double

    init(rates: [Rational]) {
        // LCM of the periods den/num: lcm(dens) / gcd(nums).
        var lcmDen = 1, gcdNum = 0
        for r in Set(rates) where r.num > 0 && r.den > 0 {
            let g = Self.gcd(r.num, r.den)
            let (num, den) = (r.num / g, r.den / g)
            lcmDen = lcmDen / Self.gcd(lcmDen, den) * den
            gcdNum = Self.gcd(gcdNum, num)
            if lcmDen > 1_000_000 { gcdNum = 0; break }
        }
        let p = gcdNum > 0 ? Double(lcmDen) / Double(gcdNum) : 0
        period = p <= 1 ? p : 0
    }

    /// Media reaches the run in whole microseconds, so a time on a grid line comes rounded to
    /// the nearest one, up to half a microsecond below the line (at 30 fps one line in three:
    /// k/30 s is k × 33333.33 µs). Taken as below it, a run whose first media fell on such a line
    /// was cut a whole frame early, a one-frame hole at the start of its recording; which line
    /// it falls on is where the producer's first picture happened to arrive.
    static let slack = 1e-6

    /// `t` rounded down to the grid, a time within `slack` below a line counting as on it.
    func floor(_ t: Double) -> Double {
        guard period > 0 else { return t }
        return ((t + Self.slack) / period).rounded(.down) * period
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
}
