import AVGraph
import Foundation

/// `hls`: encoded renditions and one audio stream to an HLS presentation a static web server
/// can serve: a master playlist at `path` naming one media playlist per rendition
/// (`1080p/index.m3u8`...), each with CMAF/fMP4 (or MPEG-TS) segments of `segment` seconds.
///
/// Segments are cut on keyframes, so each encoder must promise keyframes at fixed times
/// (`h264` with `keyframes: fixed`) that divide the segment length: then every rendition is cut
/// at the same timestamps and a player switches between them at any segment boundary (a lone
/// rendition has nothing to line up with: it may be cut at its own keyframes). Every
/// file reaches its name whole (written beside it, renamed): a player never reads half a segment
/// or playlist, and a kill -9 leaves playlists naming only complete segments (HlsWriter).
///
/// With `low-latency: PART` the presentation is Low-Latency HLS (RFC 8216bis): avgraph cuts
/// each rendition itself into CMAF parts of at most PART (a chunk per picture within them),
/// and the run's `--http` server serves it at `/hls/NODE/` with blocking playlist reload,
/// preload hints streamed as they are written, rendition reports and delta updates
/// (LowLatencyHlsWriter, LowLatencyPresentation). The disk gets the classic presentation beside it.
public final class HlsSinkNode: Sink, Node {
    public static let typeName = "hls"
    public static let summary = "writes HLS: a master playlist, and per rendition a media playlist with fMP4 or TS segments"
    public static let inputs = [
        PadSpec("video", [.encodedVideo], variadic: true,
                doc: "the renditions, one encoder each (keyframes: fixed; a lone rendition may put keyframes where it likes, as h264 passthrough does, and is cut at them); each gets a folder named after its height (1080p; a passthrough rendition's: the height the phone sends)"),
        PadSpec("audio", [.encodedAudio], required: false, doc: "one audio stream, muxed into every rendition"),
    ]
    static let path = Setting.path("path", mustExist: false, required: true,
        doc: "the master playlist (.m3u8), relative to the .pipe file; the renditions' folders go beside it; its folder is made if missing (not the folders above it)")
    static let segment = Setting.duration("segment", 0.5...60, default: "2s",
        doc: "segment length; a multiple of every encoder's keyframe interval (check refuses one that is not)")
    static let window = Setting.string("window", default: "6",
        doc: "segments each media playlist names (a live sliding window; older segments are deleted), or `all`: an EVENT playlist that keeps every segment and ends with #EXT-X-ENDLIST at a clean stop")
    static let container = Setting.choice("container", default: HlsWriter.SegmentFormat.fmp4,
        doc: "segment format: fmp4 (CMAF, .m4s with an init.mp4) or ts (MPEG-TS)")
    static let overwrite = Setting.bool("overwrite", default: false,
        doc: "replace an existing presentation at path (its renditions' playlists and segments are removed first)")
    static let lowLatency = Setting.duration("low-latency", 0.1...1,
        doc: "write Low-Latency HLS with parts of at most this long (200ms is usual), served by the run's --http server at /hls/NODE/ (blocking playlist reload, preload hints, delta updates); fmp4 only; the disk gets the classic presentation")
    public static let options = [path.spec, segment.spec, window.spec, container.spec, overwrite.spec, lowLatency.spec]

    static let windowRange = 1...10_000

    /// nil for `all`; a count of segments; or a refusal.
    static func window(_ text: String) throws(NegotiationError) -> Int? {
        if text == "all" { return nil }
        guard let n = Int(text), windowRange.contains(n) else {
            throw NegotiationError("window must be a number of segments (\(windowRange.lowerBound)..\(windowRange.upperBound)) or 'all'; got '\(text)'",
                                   option: "window", hint: "window: 6 for a live window, window: all to keep every segment")
        }
        return n
    }

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let path = n.path(Self.path) else { throw NegotiationError("needs a path", option: "path") }
        guard (path as NSString).pathExtension.lowercased() == "m3u8" else {
            throw NegotiationError("the master playlist's name must end in .m3u8", option: "path", hint: "e.g. path: ../out/ladder/master.m3u8")
        }
        // The presentation's own folder is made if missing, but not its parents: a typo in a path
        // must not scatter folders.
        let parent = ((path as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        var isDir: ObjCBool = false
        if !parent.isEmpty && !(FileManager.default.fileExists(atPath: parent, isDirectory: &isDir) && isDir.boolValue) {
            throw NegotiationError("the folder '\(parent)' does not exist", option: "path", hint: "create it first (mkdir -p)")
        }
        if FileManager.default.fileExists(atPath: path) && !n[Self.overwrite] {
            throw NegotiationError("'\(path)' already exists", option: "path", hint: "set overwrite: true to replace it, or pick another path")
        }
        _ = try window(n[Self.window])
        let segment = n[Self.segment]
        if let part = n[Self.lowLatency] {
            guard n[Self.container] == .fmp4 else {
                throw NegotiationError("low-latency HLS is written as CMAF (fmp4), not TS", option: "container", hint: "remove container: ts")
            }
            guard part * 2 <= segment + 1e-9 else {
                throw NegotiationError(String(format: "a part (%gs) must be at most half a segment (%gs)", part, segment), option: "low-latency",
                                       hint: "low-latency: 200ms with segments of 1-2 s")
            }
        }
        let videos = n.inputs(on: "video")
        guard !videos.isEmpty else { throw NegotiationError("needs at least one encoded video input (a rendition)") }
        let ts = n[Self.container] == .ts
        for input in n.inputs {
            let f = input.format
            guard f.kind.isEncoded, !f.codec.isEmpty else {
                throw NegotiationError("input '\(input.from)' is not an encoded stream", hint: "encode it first")
            }
            if Muxer.canHold(container: ts ? "mpegts" : "mp4", codec: f.codec) == false {
                throw NegotiationError("\(ts ? "TS" : "fMP4") segments cannot hold \(f.codec) (from '\(input.from)')", option: "container")
            }
        }
        if videos.count > 1, let following = videos.first(where: { $0.format.sizeVaries }) {
            // A ladder offers each rendition at a size of its own; a passthrough stream's is the phone's, whatever it sends.
            throw NegotiationError("'\(following.from)' passes the source's pictures on at the size they are sent in, but a ladder's renditions need fixed sizes",
                                   hint: "give '\(following.from)' a resize and no passthrough, or record its passthrough stream alone (one rendition, or a file)")
        }
        for input in videos {
            // The segmenter cuts at the first keyframe at or after each segment's end: only keyframes
            // at known times that divide the segment give segments of the declared length, cut
            // at the same timestamps in every rendition.
            let k = input.format.keyframeSeconds
            // A lone rendition has nothing to line up with: it is cut at its own keyframes (an
            // `h264 passthrough` stream's are the phone's), each segment at least `segment` long.
            if k == 0 && videos.count == 1 { continue }
            guard k > 0 else {
                throw NegotiationError("'\(input.from)' puts keyframes where its encoder likes, so the renditions cannot be cut at the same times",
                                       hint: "set keyframes: fixed on '\(input.from)' (with a gop whose length divides the segment)")
            }
            let ratio = segment / k
            guard ratio >= 1 - 1e-6, abs(ratio - ratio.rounded()) < 1e-6 else {
                throw NegotiationError(String(format: "the segment (%gs) is not a multiple of the keyframe interval of '%@' (%gs)", segment, input.from, k),
                                       option: "segment", hint: String(format: "make the segment a multiple of %gs, or change the gop of '%@'", k, input.from))
            }
        }
        let names = renditionNames(videos.map(\.format))
        if Set(names).count != names.count {
            throw NegotiationError("two renditions have the same size (\(names.joined(separator: ", ")))", hint: "give each rendition its own size")
        }
        return []
    }

    /// A rendition's folder: its height (`720p`).
    static func renditionNames(_ formats: [StreamFormat]) -> [String] { formats.map { "\($0.height)p" } }

    private let master: String
    private let segmentSeconds: Double
    private let windowSize: Int?
    private let format: HlsWriter.SegmentFormat
    /// Rendition folders; a lone rendition whose size follows its source (`h264 passthrough`)
    /// takes the height of its first packet's stream instead of the one `check` expected.
    private var names: [String]
    private let overwrite: Bool
    private let sizeVaries: [Bool]
    private let frameRates: [Rational]
    /// Per input: the rendition it feeds, or nil for the audio.
    private let renditionOf: [Int?]
    private var writer: HlsWriter?
    private var lowLatencyWriter: LowLatencyHlsWriter?
    private let partTarget: Double?
    private let served: ServedPresentation?
    private let nodeName: String
    private var firstStream: [EncodedStream?]
    private var ended: [Bool]
    /// Packets that came before every input had shown its stream (the header needs them all).
    private var waiting: [(input: Int, packet: Packet)] = []
    private var done = false

    public init(_ setup: NodeSetup) throws {
        master = setup.path(Self.path) ?? ""
        segmentSeconds = setup[Self.segment]
        windowSize = try Self.window(setup[Self.window])
        format = setup[Self.container]
        var rendition = 0
        renditionOf = setup.inputs.map { input in
            guard input.pad == "video" else { return nil }
            defer { rendition += 1 }
            return rendition
        }
        let videos = setup.inputs.filter { $0.pad == "video" }
        names = Self.renditionNames(videos.map(\.format))
        sizeVaries = videos.map(\.format.sizeVaries)
        overwrite = setup[Self.overwrite]
        frameRates = videos.map(\.format.frameRate)
        firstStream = Array(repeating: nil, count: setup.inputs.count)
        ended = Array(repeating: false, count: setup.inputs.count)
        partTarget = setup[Self.lowLatency]
        nodeName = setup.name
        if partTarget != nil, let web = setup.web {
            let served = ServedPresentation()
            web.route("/hls/\(setup.name)") { [name = setup.name] request in served.answer(request, node: name) }
            self.served = served
        } else {
            served = nil
        }
        let folder = (master as NSString).deletingLastPathComponent
        if !folder.isEmpty && !FileManager.default.fileExists(atPath: folder) {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        }
        super.init()
        if FileManager.default.fileExists(atPath: master) {
            guard setup[Self.overwrite] else { throw MediaError("'\(master)' already exists (set overwrite: true to replace it)") }
            try removePresentation()
        }
    }

    /// What an earlier run left at this path: the master, and our files in the renditions' folders.
    private func removePresentation() throws {
        for name in names { try removeRendition(name) }
        try FileManager.default.removeItem(atPath: master)
    }

    private func removeRendition(_ name: String) throws {
        let dir = "\((master as NSString).deletingLastPathComponent)/\(name)"
        let fm = FileManager.default
        for file in (try? fm.contentsOfDirectory(atPath: dir)) ?? []
        where file.hasPrefix("seg_") || file.hasPrefix("init") || file.hasPrefix("index.m3u8") {
            try fm.removeItem(atPath: "\(dir)/\(file)")
        }
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let packet = buffer.packet else { return }
        if writer != nil || lowLatencyWriter != nil { return try write(packet, input: input) }
        if firstStream[input] == nil { firstStream[input] = packet.stream }
        waiting.append((input, packet))
        if waiting.count > Self.maxWaiting {
            // An input that neither starts nor ends must not hold the others (and memory) forever.
            let silent = firstStream.indices.filter { firstStream[$0] == nil && !ended[$0] }
            if let r = silent.compactMap({ renditionOf[$0] }).first {
                throw MediaError("rendition \(names[r]) sent nothing in \(Self.maxWaiting) packets of the others")
            }
            out.warning("writing '\(master)' without audio: none arrived in \(Self.maxWaiting) packets of the video")
            for i in silent { ended[i] = true }
        }
        try startWhenEveryInputShowed()
    }

    /// About 5 s of a 4-rendition ladder at 30 fps with its audio.
    static let maxWaiting = 1000

    override public func inputEnded(_ input: Int, _ out: Outlet) throws {
        ended[input] = true
        try startWhenEveryInputShowed()
    }

    private func startWhenEveryInputShowed() throws {
        guard writer == nil, lowLatencyWriter == nil, firstStream.indices.allSatisfy({ firstStream[$0] != nil || ended[$0] }) else { return }
        var renditions: [HlsWriter.Rendition] = []
        var audio: EncodedStream?
        for (input, stream) in firstStream.enumerated() {
            guard let r = renditionOf[input] else { audio = stream; continue }
            guard let stream else { throw MediaError("rendition \(names[r]) ended before its first packet") }
            if sizeVaries[r], case let real = "\(stream.parameters.pointee.height)p", real != names[r] {
                if overwrite { try removeRendition(real) }
                names[r] = real
            }
            renditions.append(.init(name: names[r], video: stream, frameRate: frameRates[r]))
        }
        if let partTarget {
            // Time zero of every rendition's fragments: the earliest packet that came.
            let origin = waiting.map { Double($0.packet.dts == Int64.min ? $0.packet.pts : $0.packet.dts) * $0.packet.timeBase.double }.min() ?? 0
            let writer = try LowLatencyHlsWriter(master: master, renditions: renditions, audio: audio, origin: origin, segmentSeconds: segmentSeconds,
                                                 partTarget: partTarget, window: windowSize)
            lowLatencyWriter = writer
            served?.start(writer.presentation, node: nodeName)
        } else {
            writer = try HlsWriter(master: master, renditions: renditions, audio: audio, segmentSeconds: segmentSeconds,
                                   window: windowSize, format: format)
        }
        let queued = waiting
        waiting.removeAll()
        for (input, packet) in queued { try write(packet, input: input) }
    }

    private func write(_ packet: Packet, input: Int) throws {
        guard firstStream[input] != nil else { return }
        if let lowLatencyWriter {
            if let r = renditionOf[input] { try lowLatencyWriter.write(video: packet, rendition: r) } else { try lowLatencyWriter.write(audio: packet) }
            return
        }
        guard let writer else { return }
        if let r = renditionOf[input] {
            try writer.write(video: packet, rendition: r)
        } else {
            try writer.write(audio: packet)
        }
    }

    override public func finish(_ out: Outlet) throws {
        guard !done else { return }
        done = true
        if writer == nil {
            for i in ended.indices { ended[i] = true }
            if firstStream.contains(where: { $0 != nil }) { try startWhenEveryInputShowed() }
        }
        if let lowLatencyWriter { return try lowLatencyWriter.finish() }
        guard let writer else {
            out.warning("no media arrived; '\(master)' was not written")
            return
        }
        try writer.finish()
    }

    override public func abort() {
        guard !done else { return }
        done = true
        writer?.abort()
        lowLatencyWriter?.abort()
    }
}
