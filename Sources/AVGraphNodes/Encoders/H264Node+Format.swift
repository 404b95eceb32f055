import AVGraph
import CFFmpeg
import Foundation

/// `h264`'s static contract: its format rule and how it is tuned for the run it is in, decided
/// before a node is made (check shows what negotiate says).
extension H264Node {
    /// Frames between keyframes: the `gop` option, or 2 seconds' worth at the input's rate.
    static func gopFrames(_ gop: Int?, rate: Rational) -> Int { gop ?? max(1, Int((2 * rate.double).rounded())) }

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let input = try PictureEncoding.input(n, name: typeName, passthrough: n[Self.passthrough] == .auto)
        if n[Self.profile] == .baseline, case let b = n[Self.bframes], b > 0 {
            throw NegotiationError("the baseline profile has no B-frames; got bframes \(b)", option: "bframes", hint: "set bframes: 0 or profile: main")
        }
        if n[Self.passthrough] == .auto {
            if n[Self.bframes] > 0 {
                throw NegotiationError("passthrough splices pictures in decode order: no B-frames", option: "bframes", hint: "set bframes: 0")
            }
            if n[Self.keyframes] == .fixed {
                throw NegotiationError("passthrough keeps the source's keyframes: they cannot also be fixed", option: "keyframes", hint: "drop keyframes: fixed or passthrough")
            }
            if n[Self.tune] != nil || n[Self.lookahead] != nil {
                throw NegotiationError("passthrough encodes with x264's zerolatency tuning, so that each picture's packet comes out before the next source packet",
                                       option: n[Self.tune] != nil ? "tune" : "lookahead", hint: "drop it")
            }
        }
        if n[Self.crf] == 0 {
            // x264 encodes lossless only in High 4:4:4 Predictive; none of our profiles: it would fail as the encoder opens.
            throw NegotiationError("crf 0 is lossless, which x264 encodes only in the High 4:4:4 Predictive profile, not \(n[Self.profile].rawValue)",
                                   option: "crf", hint: "use crf: 1 or more (visually lossless from about 17)")
        }
        try PictureEncoding.checkRates(crf: n[Self.crf], maxrate: n[Self.maxrate], bitrate: n[Self.bitrate])
        if let adaptive = n[Self.adaptive] {
            if n[Self.crf] != nil { throw NegotiationError("adaptive follows the uplink with the bitrate; crf has none", option: "adaptive", hint: "drop crf, or adaptive") }
            if case .int(let floor)? = adaptive["min"], floor > n[Self.bitrate] {
                throw NegotiationError("adaptive min (\(floor / 1000)k) is above the bitrate (\(n[Self.bitrate] / 1000)k), its ceiling", option: "adaptive")
            }
        }
        if n[Self.bufsize] != nil && n[Self.maxrate] == nil && n[Self.crf] != nil {
            throw NegotiationError("bufsize needs maxrate with crf", option: "bufsize", hint: "add maxrate, e.g. maxrate: 4M")
        }
        var f = try PictureEncoding.output(input, codec: "h264", encoder: "libx264", profile: n[Self.profile].rawValue,
                                           bitRate: n[Self.crf] == nil ? n[Self.bitrate] : 0, passthrough: n[Self.passthrough] == .auto)
        if n[Self.keyframes] == .fixed { f.keyframeSeconds = Double(gopFrames(n[Self.gop], rate: input.frameRate)) / input.frameRate.double }
        return [f]
    }

    /// Lookahead (frames) of live encoders that set a tune of their own but no `lookahead`.
    static let realtimeLookahead = 1

    enum LiveTuning: Equatable { case zerolatency, lookahead(Int?, sync: Bool) }

    /// Realtime runs that set neither `tune` nor `lookahead` encode with x264's zerolatency
    /// tuning (no lookahead, no mb-tree, slice threads): each frame x264 looks ahead holds ~2.8 MB
    /// at 720p, and the phone path must fit in 50 MB. Measured with PushExample (720p out of
    /// 64x64 pushes, 5 s): private memory 46.4 MB with a 1-frame lookahead, 36.0 MB with
    /// zerolatency; on the bench's screen clip (W1 graph, one thread) SSIM against the lossless
    /// reference differs by ~0.0001 (mb-tree's gain), see docs/INGEST.md. A realtime run with a
    /// tune of its own keeps a 1-frame lookahead; offline runs keep the preset's (veryfast: 10).
    static func liveTuning(tune: Tune?, lookahead: Int?, realtime: Bool) -> LiveTuning {
        if let lookahead { return .lookahead(lookahead, sync: true) }
        guard realtime, tune != .zerolatency else { return .lookahead(nil, sync: true) }
        return tune == nil ? .zerolatency : .lookahead(realtimeLookahead, sync: false)
    }
    /// Pixels a second one x264 thread encodes at veryfast with room to spare on this class of
    /// machine (~90 fps of 720p measured; a live encoder must never fall behind).
    static let pixelsPerThread = 40_000_000.0

    /// `threads: 0`: offline runs go as fast as they can with two frame threads per core (x264's
    /// own default is 1.5): a frame thread waits for the rows of the frame it references, and
    /// the spare threads keep the cores busy meanwhile. W1 on 2 cores (medians of 3): 2 threads
    /// 7.94 s, 3 7.67 s, 4 7.61 s, 6 no faster than 4; each thread holds ~4 MB at 720p. Beyond 16,
    /// frame threads cost quality (each predicts from a less finished reference). Live runs use
    /// as many threads as the pixel rate needs (720p30 is one), since each frame thread adds a
    /// picture of delay and several MB of buffers (one thread instead of two: -8 MB at 720p).
    static func fittedThreads(width: Int, height: Int, rate: Double, realtime: Bool) -> Int {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard realtime else { return min(16, 2 * cores) }
        let needed = (Double(width * height) * max(1, rate) / pixelsPerThread).rounded(.up)
        return max(1, min(cores, Int(needed)))
    }
}

extension H264Node: DeclaresBitrate {
    /// The VBV peak when given, else the average bitrate (with crf a guess: the stream is not capped).
    public static func bitrateCeiling(_ options: OptionValues) -> Int? { options[maxrate] ?? options[bitrate] }
}

extension H264Node: PassesSourcePackets {
    public static func passesSourcePackets(_ options: OptionValues) -> Bool { options[passthrough] == .auto }
}
