import CFFmpeg

/// A raw PCM layout as files and apps deliver it, and the native FFmpeg sample format it becomes.
/// FFmpeg has no big-endian sample formats, so big-endian input is swapped where it lands.
public struct PCMFormat: Sendable, Equatable {
    public let name: String
    public let native: AVSampleFormat
    public let bigEndian: Bool

    /// The names `rawaudio` and `tone` accept.
    public static let names = ["s16", "s16be", "s32", "s32be", "f32", "flt", "f32be", "u8"]

    public init?(_ name: String) {
        let table: [String: (AVSampleFormat, Bool)] = [
            "u8": (AV_SAMPLE_FMT_U8, false),
            "s16": (AV_SAMPLE_FMT_S16, false), "s16le": (AV_SAMPLE_FMT_S16, false), "s16be": (AV_SAMPLE_FMT_S16, true),
            "s32": (AV_SAMPLE_FMT_S32, false), "s32le": (AV_SAMPLE_FMT_S32, false), "s32be": (AV_SAMPLE_FMT_S32, true),
            "f32": (AV_SAMPLE_FMT_FLT, false), "flt": (AV_SAMPLE_FMT_FLT, false), "f32le": (AV_SAMPLE_FMT_FLT, false),
            "f32be": (AV_SAMPLE_FMT_FLT, true),
        ]
        guard let (fmt, be) = table[name] else { return nil }
        self.name = name
        native = fmt
        bigEndian = be
    }

    public var bytesPerSample: Int { Int(av_get_bytes_per_sample(native)) }
    /// The FFmpeg name of the native format (`s16`, `flt`), as the stream format says it.
    public var nativeName: String { SampleFormat.name(native) }

    /// Turns `byteCount` bytes just read or generated in this layout into native samples, in place.
    public func ingest(_ bytes: UnsafeMutableRawPointer, byteCount: Int) {
        guard bigEndian != PCM.hostIsBigEndian else { return }
        PCM.swapBytes(bytes, byteCount: byteCount, sampleSize: bytesPerSample)
    }
}

public enum PCM {
    public static let hostIsBigEndian = 1.bigEndian == 1

    /// Reverses the bytes of every `sampleSize`-byte sample.
    public static func swapBytes(_ p: UnsafeMutableRawPointer, byteCount: Int, sampleSize: Int) {
        let n = byteCount / sampleSize
        switch sampleSize {
        case 2:
            let s = p.assumingMemoryBound(to: UInt16.self)
            for i in 0..<n { s[i] = s[i].byteSwapped }
        case 4:
            let s = p.assumingMemoryBound(to: UInt32.self)
            for i in 0..<n { s[i] = s[i].byteSwapped }
        case 8:
            let s = p.assumingMemoryBound(to: UInt64.self)
            for i in 0..<n { s[i] = s[i].byteSwapped }
        default:
            break
        }
    }
}

/// FFmpeg sample formats by name, as `StreamFormat.sampleFormat` carries them.
public enum SampleFormat {
    public static func named(_ name: String) -> AVSampleFormat? {
        let f = av_get_sample_fmt(name)
        return f == AV_SAMPLE_FMT_NONE ? nil : f
    }

    public static func name(_ f: AVSampleFormat) -> String {
        av_get_sample_fmt_name(f).map { String(cString: $0) } ?? "none"
    }

    public static func isPlanar(_ f: AVSampleFormat) -> Bool { av_sample_fmt_is_planar(f) != 0 }

    /// The formats a `resample` node can produce.
    public static let all = ["u8", "s16", "s32", "s64", "flt", "dbl", "u8p", "s16p", "s32p", "s64p", "fltp", "dblp"]
}
