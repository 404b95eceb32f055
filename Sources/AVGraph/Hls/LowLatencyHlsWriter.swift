import Foundation

/// A low-latency HLS presentation being written (`hls` with `low-latency`): each rendition cut
/// into CMAF chunks, parts and segments by a `LowLatencyRendition`, published to the
/// `LowLatencyPresentation` its server reads, and written to disk as a classic presentation
/// (whole segments, renamed into place; playlists naming only those) that a static web server
/// can serve and a kill -9 leaves playable.
///
/// The audio is muxed into every rendition, as the classic writer does: one phone sends one
/// sound, a player then asks one blocking request per part instead of two, and every player
/// (ffmpeg 5.1's included) plays a muxed fMP4 rendition without alternate-audio support.
public final class LowLatencyHlsWriter {
    public let presentation: LowLatencyPresentation
    private let masterPath: String
    private let renditions: [HlsWriter.Rendition]
    private let cutters: [LowLatencyRendition]
    private let audio: EncodedStream?
    /// Media time zero, in each stream's seconds: the earliest first packet of all inputs, so every
    /// rendition's fragments share one timeline.
    private let origin: Double
    /// The wall clock at media time zero (EXT-X-PROGRAM-DATE-TIME), set at the first packet.
    private var wallOrigin: Date?
    private var masterWritten = false
    private var finished = false

    public init(master masterPath: String, renditions: [HlsWriter.Rendition], audio: EncodedStream?, origin: Double,
                segmentSeconds: Double, partTarget: Double, window: Int?) throws {
        self.masterPath = masterPath
        self.renditions = renditions
        self.audio = audio
        self.origin = origin
        let folder = (masterPath as NSString).deletingLastPathComponent
        presentation = LowLatencyPresentation(.init(master: (masterPath as NSString).lastPathComponent, renditions: renditions.map(\.name),
                                                    targetDuration: Int(segmentSeconds.rounded(.up)), partTarget: partTarget, window: window,
                                                    folder: folder))
        var cutters: [LowLatencyRendition] = []
        for (i, r) in renditions.enumerated() {
            let dir = "\(folder)/\(r.name)"
            if !FileManager.default.fileExists(atPath: dir) { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false) }
            cutters.append(try LowLatencyRendition(index: i, name: r.name, folder: dir, video: r.video, audio: audio, segmentSeconds: segmentSeconds,
                                                   partTarget: partTarget, window: window, presentation: presentation))
        }
        self.cutters = cutters
    }

    /// A packet's times in seconds from the origin; its duration, or `fallback` when it has none.
    private func timed(_ packet: Packet, fallback: Double) -> LowLatencyRendition.Timed {
        let base = packet.timeBase.double
        let pts = packet.pts == Int64.min ? packet.dts : packet.pts
        let dts = packet.dts == Int64.min ? pts : packet.dts
        let duration = packet.av.pointee.duration > 0 ? Double(packet.av.pointee.duration) * base : fallback
        return .init(packet: packet, time: Double(pts) * base - origin, decodeTime: Double(dts) * base - origin, duration: duration)
    }

    private func date(_ time: Double) -> Date {
        (wallOrigin ?? Date()).addingTimeInterval(time)
    }

    public func write(video packet: Packet, rendition i: Int) throws {
        let rate = renditions[i].frameRate.double
        let t = timed(packet, fallback: rate > 0 ? 1 / rate : 1.0 / 30)
        if wallOrigin == nil { wallOrigin = Date().addingTimeInterval(-t.time) }
        try cutters[i].add(video: t, date: date)
        if !masterWritten { try writeMasterWhenReady() }
    }

    public func write(audio packet: Packet) throws {
        let rate = Double(packet.stream.parameters.pointee.sample_rate)
        let frames = Double(packet.stream.parameters.pointee.frame_size)
        let t = timed(packet, fallback: rate > 0 && frames > 0 ? frames / rate : 0.02)
        // One Packet for every rendition: each fragmenter takes its own reference when it writes it.
        for cutter in cutters { try cutter.add(audio: t, date: date) }
    }

    /// Completes every rendition's last part and segment and ends the playlists (#EXT-X-ENDLIST).
    public func finish() throws {
        guard !finished else { return }
        finished = true
        for cutter in cutters { try cutter.finish(date: date) }
        presentation.end()
        for cutter in cutters { try cutter.writePlaylist() }
        try writeMasterWhenReady(force: true)
    }

    /// The run failed elsewhere: the playlists stay as they are (naming whole segments only).
    public func abort() {
        finished = true
        presentation.end()
    }

    /// The master playlist once every rendition has a complete segment (a measured bandwidth for
    /// a rendition without a declared bit rate); served and written to disk whole.
    private func writeMasterWhenReady(force: Bool = false) throws {
        guard !masterWritten, force || cutters.allSatisfy({ $0.measured.seconds > 0 }) else { return }
        let text = HlsWriter.master(renditions, audio: audio, version: 9) { i in
            HlsWriter.bandwidth(video: self.renditions[i].video, audio: self.audio, measured: self.cutters[i].measured)
        }
        try LowLatencyRendition.writeWhole(Array(text.utf8), to: masterPath)
        presentation.publish(master: text)
        masterWritten = true
    }
}
