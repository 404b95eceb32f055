import Foundation

/// One rendition of a low-latency HLS presentation being cut: its video packets and its copy
/// of the audio become a CMAF chunk per picture (the picture and the audio up to its end),
/// chunks make parts of at most the part target, parts make segments that start at keyframes.
/// Each chunk is published as soon as it is cut (a player holding the part's request gets it
/// then), each part and segment once complete; the segment is written to disk whole
/// (`seg_NNNNN.m4s`, renamed into place) and the classic playlist beside it rewritten the same way.
final class LowLatencyRendition {
    struct Timed {
        let packet: Packet
        /// Seconds from the presentation's origin.
        let time: Double, decodeTime: Double, duration: Double
    }

    let index: Int
    let name: String
    let folder: String
    private let fragmenter: CmafFragmenter
    private let presentation: LowLatencyPresentation
    private let hasAudio: Bool
    private let segmentSeconds: Double
    private let partTarget: Double
    private let window: Int?
    private var video: [Timed] = []
    private var audio: [Timed] = []
    /// The audio's newest time: a picture's chunk waits (a little) for the audio up to its end.
    private var audioReached = -Double.infinity
    private var audioEnded = false
    private var segment: (msn: Int, start: Double, parts: [[UInt8]])?
    private var part: (start: Double, independent: Bool, chunks: [[UInt8]])?
    private var nextMsn = 0
    private var videoReached = 0.0
    private var complete: [Int] = []
    /// Bytes and seconds of the complete segments: the BANDWIDTH of a rendition without a declared bit rate.
    private(set) var measured = (bytes: 0, seconds: 0.0)

    /// The most pictures held waiting for the audio (about half a second): a mic that lags or
    /// stops must not hold the picture back longer.
    static let maxHeldPictures = 15

    init(index: Int, name: String, folder: String, video: EncodedStream, audio: EncodedStream?, segmentSeconds: Double, partTarget: Double,
         window: Int?, presentation: LowLatencyPresentation) throws {
        (self.index, self.name, self.folder) = (index, name, folder)
        (self.segmentSeconds, self.partTarget, self.window, self.presentation) = (segmentSeconds, partTarget, window, presentation)
        hasAudio = audio != nil
        fragmenter = try CmafFragmenter(video: video, audio: audio)
        try Self.writeWhole(fragmenter.initSegment, to: "\(folder)/init.mp4")
        presentation.publish(initSegment: fragmenter.initSegment, rendition: index)
    }

    func add(video packet: Timed, date: (Double) -> Date) throws {
        video.append(packet)
        try pump(date: date)
    }

    func add(audio packet: Timed, date: (Double) -> Date) throws {
        audio.append(packet)
        audioReached = packet.time
        try pump(date: date)
    }

    /// Writes what is held, then completes the last part and segment and ends the playlist.
    func finish(date: (Double) -> Date) throws {
        audioEnded = true
        try pump(date: date)
        try completeSegment(at: videoReached)
    }

    private func pump(date: (Double) -> Date) throws {
        while let v = video.first {
            let end = v.time + v.duration
            if hasAudio && !audioEnded && audioReached < end - 1e-6 && video.count < Self.maxHeldPictures { return }
            video.removeFirst()
            guard try begin(v, date: date) else { continue }
            try fragmenter.add(v.packet, track: 0, seconds: v.time, dtsSeconds: v.decodeTime, duration: v.duration)
            let start = segment?.start ?? 0
            while let a = audio.first, a.time < end - 1e-6 {
                audio.removeFirst()
                // Audio from before the first segment's picture has no picture to go with.
                if a.time >= start - 1e-6 { try fragmenter.add(a.packet, track: 1, seconds: a.time, dtsSeconds: a.decodeTime, duration: a.duration) }
            }
            let chunk = try fragmenter.cut()
            part?.chunks.append(chunk)
            presentation.append(chunk: chunk, rendition: index)
            videoReached = end
        }
    }

    /// Completes the part or segment that picture `v` does not fit in and begins its own;
    /// false for a picture before the first keyframe (dropped: nothing before it decodes).
    private func begin(_ v: Timed, date: (Double) -> Date) throws -> Bool {
        guard let current = segment else {
            guard v.packet.isKeyframe else { return false }
            beginSegment(at: v.time, date: date)
            return true
        }
        if v.packet.isKeyframe && v.time - current.start >= segmentSeconds - 1e-3 {
            try completeSegment(at: v.time)
            beginSegment(at: v.time, date: date)
        } else if let p = part, v.time + v.duration > p.start + partTarget + 1e-6 {
            try completePart(at: v.time)
            part = (v.time, v.packet.isKeyframe, [])
        }
        return true
    }

    private func beginSegment(at time: Double, date: (Double) -> Date) {
        segment = (nextMsn, time, [])
        presentation.beginSegment(nextMsn, date: date(time), rendition: index)
        nextMsn += 1
        part = (time, true, [])
    }

    /// Completes the part being written; `endingSegment`: and the segment with it.
    private func completePart(at time: Double, endingSegment: Bool = false) throws {
        guard let p = part, !p.chunks.isEmpty else { return }
        part = nil
        let bytes = p.chunks.flatMap { $0 }
        segment?.parts.append(bytes)
        var whole: (duration: Double, bytes: [UInt8])?
        if endingSegment, let s = segment {
            whole = (time - s.start, s.parts.flatMap { $0 })
            // On disk before any playlist names it.
            try Self.writeWhole(whole!.bytes, to: "\(folder)/\(LowLatencyPlaylist.segmentURI(s.msn))")
        }
        presentation.completePart(duration: time - p.start, independent: p.independent, bytes: bytes, segment: whole, rendition: index)
    }

    private func completeSegment(at time: Double) throws {
        try completePart(at: time, endingSegment: true)
        guard let s = segment, !s.parts.isEmpty else { return }
        segment = nil
        let bytes = s.parts.reduce(0) { $0 + $1.count }
        measured = (measured.bytes + bytes, measured.seconds + time - s.start)
        complete.append(s.msn)
        // The presentation let the oldest go with this one (its bytes stay a window longer, RFC 8216bis 6.2.2).
        if let window, complete.count > window { complete.removeFirst() }
        try writePlaylist()
        // Deleted a window after the playlist stops naming it: a player that read it just before may still ask.
        if let window, let first = complete.first, first - window - 1 >= 0 {
            try? FileManager.default.removeItem(atPath: "\(folder)/\(LowLatencyPlaylist.segmentURI(first - window - 1))")
        }
    }

    func writePlaylist() throws {
        try Self.writeWhole(Array(presentation.playlist(index).renderClassic().utf8), to: "\(folder)/index.m3u8")
    }

    /// Written beside its name, then renamed over it: a reader never sees half of it.
    static func writeWhole(_ bytes: [UInt8], to path: String) throws {
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw MediaError("cannot write '\(path)': \(error.localizedDescription)")
        }
    }
}
