import AVGraph
import CFFmpeg
import Foundation
import Synchronization

/// `file` as a source: decodes a media file's video and audio, in file order, with the file's
/// own timestamps (shifted so the file starts at 0, and by one play's length per loop).
public final class FileSourceNode: Source, Node {
    public static let typeName = "file"
    public static let summary = "decodes a media file (its first video and audio streams)"
    public static let outputs = [
        PadSpec("video", [.rawVideo], doc: "decoded pictures, tagged with the file's rotation; no frames when the file has no video"),
        PadSpec("audio", [.rawAudio], doc: "decoded audio; nothing when the file has no audio"),
    ]
    static let path = Setting.path("path", mustExist: false, required: true,
        doc: "the media file, relative to the .pipe file; `-` reads a stream from standard input (MPEG-TS, MKV, FLV: not a non-fragmented MP4), a URL (http://, https://, rtmp://...) reads it from the network")
    static let loop = Setting.loop("loop", doc: "false plays once, true forever, a number that many times; each play continues the timestamps of the last")
    public static let options = [path.spec, loop.spec]

    /// What libavformat opens: `-` is standard input, a URL stays as written, a path is resolved.
    static func input(_ raw: String?, resolved: String?) -> String? {
        guard let raw else { return nil }
        if raw == "-" { return "pipe:0" }
        if raw.contains("://") { return raw }
        return resolved
    }

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let path = input(n[Self.path], resolved: n.path(Self.path)) else { throw NegotiationError("needs a path", option: "path") }
        let isFile = !path.contains(":")
        if isFile && !FileManager.default.isReadableFile(atPath: path) {
            throw NegotiationError("file not found or not readable: '\(n[Self.path] ?? "")'", option: "path",
                                   hint: "looked for \(path); paths are relative to the .pipe file")
        }
        if path == "pipe:0" && n[Self.loop] != 1 {
            throw NegotiationError("standard input can be read once: it cannot loop", option: "loop")
        }
        do {
            let probe = try FileProbe.opened(path)
            if probe.video == nil && probe.audio == nil {
                throw NegotiationError("'\(path)' has neither video nor audio", option: "path")
            }
            return [probe.videoFormat, probe.audioFormat]
        } catch let e as NegotiationError {
            throw e
        } catch {
            throw NegotiationError("\(error)", option: "path")
        }
    }

    private let path: String
    private var playsLeft: Int
    private let endTime: Double?
    private var probe: FileProbe
    private let packet = av_packet_alloc()!
    private var video: Track?
    private var audio: Track?
    /// Microseconds added to this play's timestamps: the length of the plays before it.
    private var loopOffset: Int64 = 0
    private var playEnd: Int64 = 0
    private var draining = false

    /// One decoded stream of the file and the output it feeds.
    private final class Track {
        let index: Int
        let output: Int
        let timeBase: Rational
        let orientation: Orientation
        let fallbackDuration: Int64
        var decoder: Decoder
        var nextPts: Int64 = 0

        init(index: Int, output: Int, stream: UnsafeMutablePointer<AVStream>, orientation: Orientation) throws {
            self.index = index
            self.output = output
            timeBase = Rational(stream.pointee.time_base)
            self.orientation = orientation
            let rate = stream.pointee.avg_frame_rate.num > 0 ? stream.pointee.avg_frame_rate : stream.pointee.r_frame_rate
            fallbackDuration = rate.num > 0 ? av_rescale_q(1, av_inv_q(rate), stream.pointee.time_base) : 0
            decoder = try Decoder(parameters: stream.pointee.codecpar, timeBase: timeBase)
        }
    }

    public init(_ setup: NodeSetup) throws {
        path = Self.input(setup[Self.path], resolved: setup.path(Self.path)) ?? ""
        playsLeft = setup[Self.loop]
        endTime = setup.duration
        probe = try FileProbe.opened(path)
        super.init()
        try openTracks()
    }

    deinit {
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
    }

    private func openTracks() throws {
        video = try probe.video.map { try Track(index: $0, output: 0, stream: probe.demuxer.stream($0), orientation: probe.orientation) }
        audio = try probe.audio.map { try Track(index: $0, output: 1, stream: probe.demuxer.stream($0), orientation: .up) }
    }

    /// Damaged packets skipped in earlier plays, and the count last reported.
    private var damagedBefore = 0
    private var damagedReported = 0

    private var damagedThisPlay: Int {
        probe.demuxer.damagedPackets + [video, audio].compactMap { $0?.decoder.damagedPackets }.reduce(0, +)
    }

    /// Damage is skipped, as players do, and said: at the first, then each time the count doubles.
    private func reportDamage(_ out: Outlet) {
        let total = damagedBefore + damagedThisPlay
        guard total > 0, total >= damagedReported * 2 else { return }
        damagedReported = total
        out.warning("'\(path)': skipped \(total) damaged packet\(total == 1 ? "" : "s") so far")
    }

    override public func produce(_ out: Outlet) throws -> Bool {
        defer { reportDamage(out) }
        if !draining {
            if try probe.demuxer.read(into: packet) {
                let i = Int(packet.pointee.stream_index)
                if let t = [video, audio].compactMap({ $0 }).first(where: { $0.index == i }) {
                    try t.decoder.send(packet)
                    try emitDecoded(t, out)
                }
                return !pastEnd
            }
            draining = true
            for t in [video, audio].compactMap({ $0 }) {
                try t.decoder.send(nil)
                try emitDecoded(t, out)
            }
        }
        // One play is over: the next one goes on where this one ended.
        draining = false
        if playsLeft > 0 { playsLeft -= 1 }
        guard playsLeft != 0, playEnd > loopOffset else { return false }
        loopOffset = playEnd
        damagedBefore += damagedThisPlay
        probe = try FileProbe(path: path)
        try openTracks()
        return !pastEnd
    }

    private var pastEnd: Bool {
        guard let endTime else { return false }
        return Double(playEnd) / 1e6 >= endTime
    }

    private func emitDecoded(_ t: Track, _ out: Outlet) throws {
        while let av = try t.decoder.receive() {
            var pts = av.pointee.best_effort_timestamp
            if pts == avg_nopts() { pts = t.nextPts } else {
                pts -= Rational.rescale(probe.demuxer.startTime, from: Rational(1, 1_000_000), to: t.timeBase)
            }
            pts += Rational.rescale(loopOffset, from: Rational(1, 1_000_000), to: t.timeBase)
            av.pointee.pts = pts
            // The decoder's picture types must not steer the encoder downstream.
            av.pointee.pict_type = AV_PICTURE_TYPE_NONE
            var duration = av.pointee.nb_samples > 0
                ? av_rescale_q(Int64(av.pointee.nb_samples), AVRational(num: 1, den: max(av.pointee.sample_rate, 1)), t.timeBase.av)
                : av.pointee.pkt_duration
            if duration <= 0 { duration = t.fallbackDuration }
            t.nextPts = pts + duration
            playEnd = max(playEnd, Rational.rescale(t.nextPts, from: t.timeBase, to: Rational(1, 1_000_000)))
            out.emit(Frame(owning: av, timeBase: t.timeBase, orientation: t.orientation), output: t.output)
        }
    }
}

/// What `check` and the source learn from opening a file.
struct FileProbe {
    /// Standard input is read once: the probe `check` made is the one the source reads from.
    /// A Demuxer is not Sendable: the one probe of stdin is made under `stdinLock` and handed to
    /// the one source that reads it.
    nonisolated(unsafe) private static var stdin: FileProbe?
    private static let stdinLock = Mutex(())

    static func opened(_ path: String) throws -> FileProbe {
        guard path == "pipe:0" else { return try FileProbe(path: path) }
        return try stdinLock.withLock { _ in
            if let p = stdin { return p }
            let p = try FileProbe(path: path)
            stdin = p
            return p
        }
    }

    let demuxer: Demuxer
    let video: Int?
    let audio: Int?
    let orientation: Orientation

    init(path: String) throws {
        let d = try Demuxer(path: path)
        demuxer = d
        video = d.bestStream(AVMEDIA_TYPE_VIDEO)
        audio = d.bestStream(AVMEDIA_TYPE_AUDIO)
        orientation = video.map { FileProbe.orientation(of: d.stream($0)) } ?? .up
    }

    /// A missing stream gives an empty format (zero size and rate): the output then carries nothing.
    var videoFormat: StreamFormat {
        guard let v = video else { return StreamFormat(kind: .rawVideo) }
        let st = demuxer.stream(v).pointee
        let par = st.codecpar.pointee
        var rate = Rational(st.avg_frame_rate.num > 0 ? st.avg_frame_rate : st.r_frame_rate)
        if rate.num <= 0 || rate.den <= 0 { rate = Rational(0, 1) }
        var f = StreamFormat.video(width: Int(par.width), height: Int(par.height),
                                   pixelFormat: av_get_pix_fmt_name(AVPixelFormat(par.format)).map { String(cString: $0) } ?? "",
                                   frameRate: rate)
        f.timeBase = Rational(st.time_base)
        f.tagged = orientation != .up
        return f
    }

    var audioFormat: StreamFormat {
        guard let a = audio else { return StreamFormat(kind: .rawAudio) }
        let st = demuxer.stream(a).pointee
        let par = st.codecpar.pointee
        var f = StreamFormat.audio(sampleRate: Int(par.sample_rate), channels: Int(par.ch_layout.nb_channels),
                                   sampleFormat: av_get_sample_fmt_name(AVSampleFormat(par.format)).map { String(cString: $0) } ?? "")
        f.timeBase = Rational(st.time_base)
        return f
    }

    /// The EXIF orientation of a stream's display matrix (a phone's "rotate" tag).
    static func orientation(of stream: UnsafeMutablePointer<AVStream>) -> Orientation {
        guard let data = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, nil) else { return .up }
        return Orientation(displayMatrix: UnsafeRawPointer(data))
    }
}
