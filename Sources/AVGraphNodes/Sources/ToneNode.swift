import AVGraph
import CFFmpeg
import Foundation

/// A sine test source standing in for app audio or a microphone: it can start late, go quiet
/// for a while (delivering nothing, as an app that plays nothing does) and, as `s16be`, arrive
/// big-endian like some app-audio sources. The phase follows absolute sample time, so the
/// tone picks up after a gap exactly where an uninterrupted tone would be.
public final class ToneNode: Source, Node {
    public static let typeName = "tone"
    public static let summary = "sine test audio (app audio or a microphone, with late start and gaps)"
    public static let outputs = [PadSpec("audio", [.rawAudio], doc: "the tone, pts in samples (time base 1/rate)")]

    static let freq = Setting.number("freq", 1...96_000, default: 440, doc: "frequency in Hz")
    static let rate = Setting.int("rate", 8000...384_000, default: 48000, doc: "sample rate in Hz")
    static let channels = Setting.int("channels", 1...8, default: 1, doc: "channel count (the same tone on every channel)")
    static let level = Setting.gain("level", default: "-12dB", doc: "peak level, in dBFS or as a linear factor (at most 0dB)")
    static let start = Setting.duration("start", 0...1e6, default: "0s", doc: "time of the first sample (a microphone that starts late)")
    static let gaps = Setting.spans("gaps", doc: "spans of media time with no audio delivered at all, like [{at: 5s, for: 2s}]")
    static let duration = Setting<Double?>.duration("duration", 0...1e9, doc: "media time at which the tone ends (none: endless)")
    static let format = Setting.choice("format", default: Layout.s16,
                                       doc: "sample layout as the source delivers it; big-endian layouts are made native on arrival")
    static let block = Setting.int("block", 16...65536, default: 1024, doc: "samples per frame")
    public static let options = [freq.spec, rate.spec, channels.spec, level.spec, start.spec, gaps.spec, duration.spec, format.spec, block.spec]

    enum Layout: String, CaseIterable, Sendable { case s16, s16be, s32, s32be, flt, f32be, fltp }

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let rate = n[Self.rate], freq = n[Self.freq]
        if freq >= Double(rate) / 2 {
            throw NegotiationError("freq \(freq) Hz is not below half the sample rate (\(rate / 2) Hz)", option: "freq",
                                   hint: "raise 'rate' or lower 'freq'")
        }
        if n[Self.level] > 1.0001 {
            throw NegotiationError("level above 0 dBFS would clip", option: "level", hint: "use 0dB or less")
        }
        let format = n[Self.format].rawValue
        let native = format == "fltp" ? "fltp" : (PCMFormat(format)?.nativeName ?? format)
        return [.audio(sampleRate: rate, channels: n[Self.channels], sampleFormat: native)]
    }

    private let freq: Double
    private let rate: Int
    private let channels: Int
    private let level: Double
    private let wire: PCMFormat?
    private let pool: AudioFramePool
    private let block: Int
    private var position: Int64
    private let end: Int64?
    private let gaps: [Range<Int64>]

    public init(_ setup: NodeSetup) throws {
        freq = setup[Self.freq]
        rate = setup[Self.rate]
        channels = setup[Self.channels]
        level = setup[Self.level]
        block = setup[Self.block]
        let format = setup[Self.format].rawValue
        wire = format == "fltp" ? nil : PCMFormat(format)
        let native = wire?.native ?? AV_SAMPLE_FMT_FLTP
        pool = try AudioFramePool(format: native, channels: channels, sampleRate: rate, capacity: block)
        let r = Double(rate)
        position = Int64((setup[Self.start] * r).rounded())
        end = setup.duration.map { Int64(($0 * r).rounded()) }
        gaps = setup[Self.gaps].map { Int64(($0.at * r).rounded())..<Int64((($0.at + $0.length) * r).rounded()) }
    }

    override public func produce(_ out: Outlet) throws -> Bool {
        while let gap = gaps.first(where: { $0.contains(position) }) { position = gap.upperBound }
        var n = Int64(block)
        if let end { n = min(n, end - position) }
        if let next = gaps.first(where: { $0.lowerBound > position }) { n = min(n, next.lowerBound - position) }
        guard n > 0 else { return false }
        let frame = try pool.frame(samples: Int(n), pts: position)
        fill(frame)
        out.emit(frame)
        position += n
        return true
    }

    /// Writes the block in the source's own layout (big-endian too), then ingests it as a real
    /// source's bytes would be.
    private func fill(_ frame: Frame) {
        let n = frame.sampleCount
        func sample(_ i: Int) -> Double {
            // Phase from the absolute sample index: continuous across gaps, no drift over hours.
            let cycles = (freq * Double(position + Int64(i))).truncatingRemainder(dividingBy: Double(rate)) / Double(rate)
            return level * sin(2 * .pi * cycles)
        }
        guard let wire else {
            for c in 0..<channels {
                let p = frame.audioData(c).assumingMemoryBound(to: Float.self)
                for i in 0..<n { p[i] = Float(sample(i)) }
            }
            return
        }
        let data = frame.audioData()
        let be = wire.bigEndian
        for i in 0..<n {
            let v = sample(i)
            for c in 0..<channels {
                let k = i * channels + c
                switch wire.native {
                case AV_SAMPLE_FMT_S16:
                    let s = Int16(max(-32768, min(32767, (v * 32768).rounded())))
                    data.assumingMemoryBound(to: Int16.self)[k] = be ? s.bigEndian : s.littleEndian
                case AV_SAMPLE_FMT_S32:
                    let s = Int32(max(-2_147_483_648, min(2_147_483_647, (v * 2_147_483_648).rounded())))
                    data.assumingMemoryBound(to: Int32.self)[k] = be ? s.bigEndian : s.littleEndian
                case AV_SAMPLE_FMT_FLT:
                    let bits = Float(v).bitPattern
                    data.assumingMemoryBound(to: UInt32.self)[k] = be ? bits.bigEndian : bits.littleEndian
                default:
                    data.assumingMemoryBound(to: UInt8.self)[k] = UInt8(max(0, min(255, 128 + (v * 128).rounded())))
                }
            }
        }
        wire.ingest(data, byteCount: n * channels * wire.bytesPerSample)
    }
}

extension ToneNode: EndsByItself {
    public static func mediaDuration(_ options: OptionValues) -> Double? { options[duration] }
}
