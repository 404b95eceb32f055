import AVGraph
import CFFmpeg
import Foundation

/// One file a `file` sink writes: its only file, or one part of a `split` recording.
///
/// The file is a journal while it is recorded: MP4/MOV are written as fragments of at most
/// a second, and each fragment (each packet for other containers) reaches the file whole, so
/// whatever ends the process (kill -9, out of memory, a power cut) leaves a file that plays up
/// to its last second or so. A full disk cuts the file back to its last complete fragment. At a
/// clean end an MP4 is rewritten as a regular one with its index in front (to a temporary, then
/// renamed over the journal), unless `fragmented` asks to leave it as is.
final class RecordingFile {
    let path: String
    /// 1 for the only file; a split recording's part number.
    let part: Int
    let container: String
    private let muxer: Muxer
    /// Per sink input: its stream in this file (nil: not in the file).
    private var streamIndex: [Int?]
    /// The media time that is 0 in this file, in the time base it was read in; nil keeps the
    /// timestamps as they come (the first part, as an unsplit file has always been written).
    private let zero: (value: Int64, timeBase: Rational)?
    /// What the file holds, for the `recording` event: pictures and the span of media (µs, on the
    /// run's timeline).
    private(set) var pictures = 0
    private var firstMicroseconds: Int64?
    private(set) var endMicroseconds: Int64 = .min

    static let fragmentMicroseconds = 1_000_000

    init(path: String, part: Int = 1, container: String, inputs: Int, zero: (value: Int64, timeBase: Rational)? = nil) throws {
        self.path = path
        self.part = part
        self.container = container
        self.zero = zero
        streamIndex = Array(repeating: nil, count: inputs)
        muxer = try Muxer(journalAt: path, format: container)
        // A run killed while finalizing this path left its half-made copy.
        unlink(Self.temporary(for: path))
    }

    var headerWritten: Bool { muxer.headerWritten }
    private var isMP4: Bool { container == "mp4" || container == "mov" }

    /// Adds one stream per input that has one (`streams[i]`) and writes the header.
    func start(streams: [EncodedStream?]) throws {
        for (i, s) in streams.enumerated() {
            if let s { streamIndex[i] = try muxer.addStream(s.parameters, timeBase: s.timeBase, orientation: s.orientation) }
        }
        var options: [String: String] = [:]
        if isMP4 {
            timescale = movieTimescale(streams)
            if let timescale { options["movie_timescale"] = timescale }
            // A fragment at each keyframe and at least every second: a crash loses at most that.
            options["movflags"] = "frag_keyframe+empty_moov+delay_moov+default_base_moof"
            options["frag_duration"] = String(Self.fragmentMicroseconds)
        }
        try muxer.writeHeader(options: options)
    }

    /// A part that starts at a video keyframe has its audio start a little later (the first
    /// audio packet after the cut), said by an empty edit in the movie's timescale; FFmpeg's 1 ms
    /// would move that audio by up to a millisecond, the audio's own rate keeps it on its sample.
    private func movieTimescale(_ streams: [EncodedStream?]) -> String? {
        guard zero != nil, let audio = streams.first(where: { $0?.kind == .encodedAudio }) ?? nil else { return nil }
        let rate = audio.parameters.pointee.sample_rate
        return rate > 0 ? String(rate) : nil
    }
    /// The movie timescale of the journal, which its regular rewrite keeps.
    private var timescale: String?

    /// Writes `packet` (moved to this file's timeline) to the stream of `input`.
    func write(_ packet: Packet, input: Int) throws {
        guard let index = streamIndex[input] else { return }
        let av = packet.av
        // The encoder's priming packet is not media a player shows.
        if av.pointee.flags & AV_PKT_FLAG_DISCARD == 0 && av.pointee.pts != avg_nopts() {
            let start = Rational.rescale(av.pointee.pts, from: packet.timeBase, to: Rational(1, 1_000_000))
            let end = Rational.rescale(av.pointee.pts + max(0, av.pointee.duration), from: packet.timeBase, to: Rational(1, 1_000_000))
            firstMicroseconds = min(firstMicroseconds ?? start, start)
            endMicroseconds = max(endMicroseconds, end)
        }
        if packet.stream.kind == .encodedVideo { pictures += 1 }
        if let zero {
            let shift = Rational.rescale(zero.value, from: zero.timeBase, to: packet.timeBase)
            if av.pointee.pts != avg_nopts() { av.pointee.pts -= shift }
            if av.pointee.dts != avg_nopts() { av.pointee.dts -= shift }
        }
        try muxer.write(av, timeBase: packet.timeBase, stream: index)
    }

    /// The run's media time that is 0 in this file.
    private var zeroMicroseconds: Int64 { zero.map { Rational.rescale($0.value, from: $0.timeBase, to: Rational(1, 1_000_000)) } ?? 0 }

    /// Seconds of media the file holds.
    var seconds: Double {
        guard let firstMicroseconds, endMicroseconds > firstMicroseconds else { return 0 }
        // Media before the file's 0 (an encoder's priming samples) is not played.
        let start = max(firstMicroseconds, zeroMicroseconds)
        return Double((endMicroseconds - start) / 1000) / 1000
    }

    /// The file's size on disk now.
    var bytes: Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }

    /// The clean end: the trailer, then (MP4, unless `fragmented`) the regular rewrite.
    func finish(faststart: Bool, fragmented: Bool) throws {
        try muxer.finish()
        if isMP4 && !fragmented { try rewriteRegular(faststart: faststart) }
    }

    /// The clean end of an MP4: the fragments become a regular file, index in front (faststart)
    /// or behind. Written beside the journal and renamed over it, so an interruption (a signal,
    /// a full disk) leaves the fragmented journal, which plays.
    private func rewriteRegular(faststart: Bool) throws {
        let temporary = Self.temporary(for: path)
        do {
            try JournalFile.replace(path, with: temporary) {
                var options = faststart ? ["movflags": "+faststart"] : [:]
                if let timescale { options["movie_timescale"] = timescale }
                try Remuxer.copy(from: path, to: temporary, format: container, options: options)
            }
        } catch {
            throw MediaError("'\(path)' is complete but stays fragmented: rewriting it as a regular MP4 failed: \(Self.explain(error))")
        }
    }

    /// Where the regular file is made, beside the journal (hidden).
    static func temporary(for path: String) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        return (folder.isEmpty ? "" : folder + "/") + "." + (path as NSString).lastPathComponent + ".finalizing"
    }

    /// FFmpeg says "No space left on device"; people look for "the disk is full".
    static func explain(_ error: Error) -> String {
        let text = "\(error)"
        if text.contains(String(cString: strerror(ENOSPC))) { return "the disk is full (\(text))" }
        return text
    }

    /// Closes and deletes the file (nothing playable was written).
    func discard() { muxer.discard() }

    /// The run failed elsewhere: the file is left as recorded (fragmented, or cut back to its last
    /// whole fragment after a write failure); a file that a failure left empty is not a recording.
    func abandon() {
        guard !muxer.closed else { return }
        let empty = muxer.journal.map { $0.failure != nil && $0.safeEnd == 0 } ?? false
        if muxer.headerWritten && !empty { try? muxer.finish() } else { muxer.discard() }
    }

    /// A trailer that a failed clean end did not write (the file then plays as recorded).
    func close() { if !muxer.closed { try? muxer.finish() } }
}
