import Foundation

/// A look-ahead peak limiter, linked across channels: the gain comes down before a peak
/// arrives (over `lookahead`), so a hard loud onset is held under the ceiling like a steady
/// tone, and it recovers slowly (`release`), so the gain does not ride the waveform and add the
/// distortion a lossy encoder then turns into overshoot. Peaks are estimated between samples
/// too (cubic interpolation at quarter steps), since a decoder reconstructs the waveform, not
/// the samples. Below the ceiling it passes the signal untouched.
///
/// Guarantee: the gain at sample k is the mean of `lookahead` held values, each no larger than
/// the gain sample k needs, so |output| ≤ ceiling at every sample and estimated inter-sample peak.
final class PeakLimiter {
    let channels: Int
    let ceiling: Float
    let lookahead: Int
    /// Samples between an input sample and its output.
    var delay: Int { lookahead + 1 }
    private let releaseCoefficient: Float
    private let mask: Int
    /// Length of each channel's ring in `x` (`mask + 1`).
    private let stride: Int
    // Raw rings, allocated once: this runs per sample and channel on every mixed block, where
    // arrays' bounds, uniqueness and exclusivity checks cost more than the arithmetic.
    /// The last `mask + 1` input samples of each channel, channel c at `x + c * (mask + 1)`.
    private let x: UnsafeMutablePointer<Float>
    /// Peak of the segment between samples i and i+1 (all channels).
    private let segment: UnsafeMutablePointer<Float>
    /// Min-hold of needed gains over the look-ahead: a monotonic queue of (index, gain) in a
    /// ring from `holdHead` to `holdTail` (at most `lookahead + 1` entries).
    private let holdIndex: UnsafeMutablePointer<Int>
    private let holdGain: UnsafeMutablePointer<Float>
    private var holdHead = 0
    private var holdTail = 0
    private var envelope: Float = 1
    private let box: UnsafeMutablePointer<Float>
    private var boxSum: Double
    /// Input samples taken so far.
    private var n = 0

    init(channels: Int, rate: Int, ceiling: Float, lookahead seconds: Double = 0.005, release: Double = 0.08) {
        self.channels = channels
        self.ceiling = ceiling
        lookahead = max(1, Int((seconds * Double(rate)).rounded()))
        releaseCoefficient = Float(1 - exp(-1 / (release * Double(rate))))
        var size = 1
        while size < lookahead + 8 { size <<= 1 }
        mask = size - 1
        stride = size
        x = .allocate(capacity: channels * size)
        x.initialize(repeating: 0, count: channels * size)
        segment = .allocate(capacity: size)
        segment.initialize(repeating: 0, count: size)
        holdIndex = .allocate(capacity: size)
        holdIndex.initialize(repeating: 0, count: size)
        holdGain = .allocate(capacity: size)
        holdGain.initialize(repeating: 1, count: size)
        box = .allocate(capacity: lookahead)
        box.initialize(repeating: 1, count: lookahead)
        boxSum = Double(lookahead)
    }

    deinit {
        x.deallocate()
        segment.deallocate()
        holdIndex.deallocate()
        holdGain.deallocate()
        box.deallocate()
    }

    /// Takes `count` samples per channel from `planes` and writes the limited output, `delay`
    /// samples behind, into the start of the same planes; returns how many were written
    /// (`count`, less the delay on the first call).
    func process(_ planes: [UnsafeMutablePointer<Float>], count: Int) -> Int {
        var written = 0
        for i in 0..<count {
            for c in 0..<channels { x[c * stride + (n & mask)] = planes[c][i] }
            if step(into: planes, at: written) { written += 1 }
        }
        return written
    }

    /// The samples still inside: pushes silence through and writes the last `delay` outputs.
    func flush(into planes: [UnsafeMutablePointer<Float>]) -> Int {
        var written = 0
        for _ in 0..<delay {
            for c in 0..<channels { x[c * stride + (n & mask)] = 0 }
            if step(into: planes, at: written) { written += 1 }
        }
        return written
    }

    /// Sample n has just been stored: the segment n-2..n-1 is known, so is the peak around
    /// sample k = n-2, its needed gain, and the output of sample k - lookahead + 1.
    @inline(__always)
    private func step(into planes: [UnsafeMutablePointer<Float>], at position: Int) -> Bool {
        defer { n += 1 }
        segment[(n - 2) & mask] = segmentPeak(from: n - 2)
        let k = n - 2
        guard k >= 0 else { return false }
        var peak = max(segment[(k - 1) & mask], segment[k & mask])
        for c in 0..<channels { peak = max(peak, abs(x[c * stride + (k & mask)])) }
        let needed: Float = peak > ceiling ? ceiling / peak : 1
        // Min over the needed gains of the last `lookahead` samples.
        while holdTail > holdHead, holdGain[(holdTail - 1) & mask] >= needed { holdTail -= 1 }
        holdGain[holdTail & mask] = needed
        holdIndex[holdTail & mask] = k
        holdTail += 1
        while holdIndex[holdHead & mask] <= k - lookahead { holdHead += 1 }
        let held = holdGain[holdHead & mask]
        envelope = held < envelope ? held : envelope + (held - envelope) * releaseCoefficient
        let slot = k % lookahead
        boxSum += Double(envelope - box[slot])
        box[slot] = envelope
        let j = k - lookahead + 1
        guard j >= 0 else { return false }
        let gain = min(Float(boxSum / Double(lookahead)), 1)
        for c in 0..<channels { planes[c][position] = x[c * stride + (j & mask)] * gain }
        return true
    }

    /// Largest |value| of the cubic (Catmull-Rom) through samples i-1...i+2, between i and i+1.
    @inline(__always)
    private func segmentPeak(from i: Int) -> Float {
        var peak: Float = 0
        for c in 0..<channels {
            let ring = x + c * stride
            let p0 = ring[(i - 1) & mask], p1 = ring[i & mask], p2 = ring[(i + 1) & mask], p3 = ring[(i + 2) & mask]
            let a = -0.5 * p0 + 1.5 * p1 - 1.5 * p2 + 0.5 * p3
            let b = p0 - 2.5 * p1 + 2 * p2 - 0.5 * p3
            let d = -0.5 * p0 + 0.5 * p2
            let q1 = ((a * 0.25 + b) * 0.25 + d) * 0.25 + p1
            let q2 = ((a * 0.5 + b) * 0.5 + d) * 0.5 + p1
            let q3 = ((a * 0.75 + b) * 0.75 + d) * 0.75 + p1
            peak = max(peak, abs(q1), abs(q2), abs(q3))
        }
        return peak
    }
}
