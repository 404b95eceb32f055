import AVGraph
import CFFmpeg
import Foundation

/// Raw PCM from a file, read straight into pooled frame buffers; big-endian layouts are
/// swapped to native in those same buffers.
public final class RawaudioNode: Source, Node {
    public static let typeName = "rawaudio"
    public static let summary = "raw PCM samples from a file"
    public static let outputs = [PadSpec("audio", [.rawAudio], doc: "the samples, pts in samples (time base 1/rate)")]
    static let path = Setting.path("path", mustExist: true, required: true, doc: "file of interleaved PCM samples")
    static let rate = Setting.int("rate", 1000...384_000, default: 48000, doc: "sample rate in Hz")
    static let channels = Setting.int("channels", 1...8, default: 2, doc: "interleaved channel count")
    static let format = Setting.choice("format", PCMFormat.names, default: "s16", doc: "sample layout of the file (be = big-endian)")
    static let loop = Setting.loop("loop", doc: "false, true (forever) or a count of plays")
    static let duration = Setting<Double?>.duration("duration", 0...1e9, doc: "media time at which reading stops")
    public static let options = [path.spec, rate.spec, channels.spec, format.spec, loop.spec, duration.spec]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let pcm = PCMFormat(n[Self.format]) else {
            throw NegotiationError("unknown format", option: "format")
        }
        return [.audio(sampleRate: n[Self.rate], channels: n[Self.channels], sampleFormat: pcm.nativeName)]
    }

    private let pcm: PCMFormat
    private let channels: Int
    private let pool: AudioFramePool
    private var fd: Int32
    private let plays: Int
    private var played = 0
    private var position: Int64 = 0
    private let end: Int64?
    private static let block = 1024

    public init(_ setup: NodeSetup) throws {
        guard let pcm = PCMFormat(setup[Self.format]) else { throw MediaError("unknown format '\(setup[Self.format])'") }
        self.pcm = pcm
        channels = setup[Self.channels]
        let rate = setup[Self.rate]
        pool = try AudioFramePool(format: pcm.native, channels: channels, sampleRate: rate, capacity: Self.block)
        plays = setup[Self.loop]
        end = setup.duration.map { Int64(($0 * Double(rate)).rounded()) }
        guard let path = setup.path(Self.path) else { throw MediaError("rawaudio needs a path") }
        fd = open(path, O_RDONLY)
        if fd < 0 { throw MediaError("cannot open '\(path)': \(String(cString: strerror(errno)))") }
    }

    deinit { if fd >= 0 { close(fd) } }

    override public func produce(_ out: Outlet) throws -> Bool {
        var want = Self.block
        if let end { want = Int(min(Int64(want), end - position)) }
        guard want > 0, fd >= 0 else { return false }
        let frame = try pool.frame(samples: want, pts: position)
        let frameBytes = channels * pcm.bytesPerSample
        let data = frame.audioData()
        var got = 0
        var readThisPass = false
        while got < want * frameBytes {
            let r = read(fd, data + got, want * frameBytes - got)
            if r < 0 {
                if errno == EINTR { continue }
                throw MediaError("reading raw audio: \(String(cString: strerror(errno)))")
            }
            if r > 0 { got += r; readThisPass = true; continue }
            // End of file: a trailing partial sample is dropped so a loop stays aligned.
            got -= got % frameBytes
            played += 1
            let again = plays < 0 || played < plays
            if !again || (!readThisPass && got == 0 && played > 1) { break }
            lseek(fd, 0, SEEK_SET)
            readThisPass = false
        }
        got -= got % frameBytes
        let samples = got / frameBytes
        guard samples > 0 else { close(fd); fd = -1; return false }
        pcm.ingest(data, byteCount: got)
        frame.setSampleCount(samples)
        out.emit(frame)
        position += Int64(samples)
        if samples < want { close(fd); fd = -1 }
        return true
    }
}

extension RawaudioNode: EndsByItself {
    public static func mediaDuration(_ options: OptionValues) -> Double? { options[duration] }
}
