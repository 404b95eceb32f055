import AVGraph
import CFFmpeg
import Foundation

/// `file` as a sink: muxes encoded streams into a file whose extension names the container.
/// The header waits until every input has delivered its first packet (or ended), because the
/// streams are described by those packets. Each file is recorded as a journal that plays after
/// any end (see RecordingFile); a full disk cuts it back to its last complete fragment and stops
/// the run.
///
/// With `split`, the recording is cut into parts at the first video keyframe at or after each
/// multiple of `split` from its start (audio-only: at the multiple). Each packet goes to exactly
/// one part: the video ones before the keyframe and the audio ones that start before the cut to
/// the part that ends there, the rest to the next, so no picture or sample is lost or doubled at
/// a join. Every part is finalized as it is cut and starts at 0 (the first keeps the timestamps
/// an unsplit file has).
public final class FileSinkNode: Sink, Node {
    public static let typeName = "file"
    public static let summary = "writes encoded streams to a media file (.mp4 .mov .mkv .flv .ts)"
    public static let inputs = [PadSpec("in", [.encodedVideo, .encodedAudio], variadic: true,
                                        doc: "encoded video and audio streams; one file stream each, in this order")]
    static let path = Setting.path("path", mustExist: false, required: true,
        doc: "the file to write, relative to the .pipe file; its extension picks the container (.mp4 .mov .mkv .flv .ts); its folder must exist; `{part}` in the file name becomes the part number, 3 digits (001, 002... 1000), 001 without split")
    static let faststart = Setting.bool("faststart", default: true,
        doc: "mp4/mov: at a clean end, put the index (moov) before the media so playback starts before the download ends (false: after it); ignored by other containers")
    static let fragmented = Setting.bool("fragmented", default: false,
        doc: "mp4/mov: leave the file fragmented as recorded (fragments of <= 1 s) instead of rewriting it as a regular MP4 at a clean end; either way it is recorded fragmented, so it plays after a crash")
    static let overwrite = Setting.bool("overwrite", default: false, doc: "replace an existing file (with split: existing parts) instead of refusing to run")
    static let split = Setting<Double?>.duration("split", 1...86_400,
        doc: "cut the recording into parts, each finalized as it ends: at the first video keyframe at or after each multiple of this much media time from the start (audio only: at the multiple); parts start at 0 and join without a picture or sample lost or twice; without {part} in the path, -001, -002... goes before the extension")
    static let keep = Setting<Double?>.duration("keep", 1...31_536_000,
        doc: "with split: after each part is finalized, delete this sink's earlier parts that ended more than this much media time before it (never the part being written, nor one still uploading)")
    static let upload = Setting.value("upload", UploadTarget.self,
        doc: "after the file (each part) is finalized, send it with one HTTP request (body streamed from disk), retried with backoff; {part} in the url becomes the part number; event `uploaded`; a failed upload keeps the file and fails the run; https checks the server's certificate (system authorities, or `ca`: a PEM file)")
    public static let options = [path.spec, faststart.spec, fragmented.spec, overwrite.spec, split.spec, keep.spec, upload.spec]
    public static let events: [any NodeEvent.Type] = [RecordingEvent.self, UploadedEvent.self]

    /// MP4 and MOV write a stream's orientation as its track's display matrix (`tkhd`); the others have none.
    public static func orientationHandling(input: Int, options: OptionValues) -> OrientationHandling {
        guard let path = options[Self.path], let container = Muxer.formatName(forPath: path), container == "mp4" || container == "mov" else { return .needsUpright }
        return .carries
    }

    /// Muxing a packet is a copy into the container's buffer; the disk write is the kernel's.
    public static func sharesProducerThread(options: OptionValues) -> Bool { true }

    static var extensionsText: String { Muxer.containers.map { ".\($0.ext)" }.joined(separator: ", ") }

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let given = n.path(Self.path) else { throw NegotiationError("needs a path", option: "path") }
        let parts = PartPaths(given, split: n[Self.split] != nil)
        if let problem = parts.problem { throw NegotiationError(problem, option: "path") }
        let path = parts.path(1)
        let ext = (path as NSString).pathExtension
        guard let container = Muxer.formatName(forPath: path) else {
            throw NegotiationError(ext.isEmpty ? "the path has no extension to pick a container" : "unknown container '.\(ext)'",
                                   option: "path", hint: "end the path with one of \(extensionsText)")
        }
        let isMP4 = container == "mp4" || container == "mov"
        if n[Self.fragmented] && !isMP4 {
            throw NegotiationError("fragmented applies to .mp4 and .mov, not '.\(ext)'", option: "fragmented",
                                   hint: "remove fragmented (.\(ext) is written as it goes anyway)")
        }
        if n[Self.keep] != nil && n[Self.split] == nil {
            throw NegotiationError("keep deletes earlier parts of a split recording; there is no split", option: "keep",
                                   hint: "add split: DURATION, or remove keep")
        }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue {
            throw NegotiationError("'\(path)' is a folder", option: "path")
        }
        if !n[Self.overwrite], let first = parts.existing().first {
            throw NegotiationError("'\(first)' already exists", option: "path", hint: "set overwrite: true to replace it, or pick another path")
        }
        for input in n.inputs {
            let f = input.format
            guard f.kind.isEncoded, !f.codec.isEmpty else {
                throw NegotiationError("input '\(input.from)' is not an encoded stream", hint: "encode it first")
            }
            if Muxer.canHold(container: container, codec: f.codec) == false {
                let fits = Muxer.containers.filter { Muxer.canHold(container: $0.format, codec: f.codec) != false }.map { ".\($0.ext)" }
                throw NegotiationError("a .\(ext) file cannot hold \(f.codec) (from '\(input.from)')", option: "path",
                                       hint: fits.isEmpty ? nil : "write it to \(fits.joined(separator: " or ")) instead")
            }
        }
        if n[Self.split] != nil, n.inputs.filter({ $0.format.kind == .encodedVideo }).count > 1 {
            throw NegotiationError("split cuts at the keyframes of one video stream; this sink has several", option: "split",
                                   hint: "split a sink with one video input (one file per rendition)")
        }
        if let ca = n[Self.upload]?.caFile {
            let file = PathResolver.resolve(ca, relativeTo: n.baseDirectory)
            if !FileManager.default.isReadableFile(atPath: file) {
                throw NegotiationError("upload ca file not found: '\(ca)'", option: "upload", hint: "looked for \(file); paths are relative to the .pipe file")
            }
        }
        if container == "flv" {
            for kind in [MediaKind.encodedVideo, .encodedAudio] where n.inputs.filter({ $0.format.kind == kind }).count > 1 {
                throw NegotiationError("an .flv file holds one video and one audio stream; got several \(kind) inputs",
                                       hint: "use .mkv, .mp4 or .ts for several streams")
            }
        }
        return []
    }

    private let parts: PartPaths
    private let container: String
    private let faststart: Bool
    private let fragmented: Bool
    /// The file being written, and its part number.
    private var file: RecordingFile
    private var firstStream: [EncodedStream?]
    private var ended: [Bool]
    /// Packets that arrived before the header could be written.
    private var pending: [(input: Int, packet: Packet)] = []
    private var done = false
    private let inputNames: [String]
    private let uploads: PartUploads?
    /// Where `abort` (which gets none) says what a failed run left.
    private var outlet: Outlet?

    // split
    private let splitMicroseconds: Int64?
    private let keepMicroseconds: Int64?
    /// The input whose keyframes cut (the one video input), while it has not ended.
    private var cuttingInput: Int?
    /// The start of the recording (µs) and the next multiple of `split` from it.
    private var nextCut: Int64 = .max
    /// Packets of the other inputs at or past `nextCut`, until the keyframe says which part they are in.
    private var held: [(input: Int, packet: Packet)] = []
    /// The part that ended at the last cut (at `at`, µs), open until the `lagging` inputs pass the cut.
    private var closing: (file: RecordingFile, at: Int64, lagging: Set<Int>)?
    /// Packets written since the last cut.
    private var sinceCut = 0
    /// This run's finalized parts, oldest first, with their end (µs), for `keep`.
    private var finished: [(path: String, end: Int64)] = []

    public init(_ setup: NodeSetup) throws {
        let split = setup[Self.split]
        parts = PartPaths(setup.path(Self.path) ?? "", split: split != nil)
        let path = parts.path(1)
        guard let container = Muxer.formatName(forPath: path) else { throw MediaError("unknown container for '\(path)'") }
        if !setup[Self.overwrite], let first = parts.existing().first {
            throw MediaError("'\(first)' already exists (set overwrite: true to replace it)")
        }
        let folder = (path as NSString).deletingLastPathComponent
        // Like ffmpeg, a missing folder is the user's to create: a typo in a path must not scatter folders.
        if !folder.isEmpty && !FileManager.default.fileExists(atPath: folder) {
            throw MediaError("cannot write '\(path)': the folder '\(folder)' does not exist")
        }
        self.container = container
        file = try RecordingFile(path: path, container: container, inputs: setup.inputs.count)
        faststart = setup[Self.faststart]
        fragmented = setup[Self.fragmented]
        firstStream = Array(repeating: nil, count: setup.inputs.count)
        ended = Array(repeating: false, count: setup.inputs.count)
        inputNames = setup.inputs.map(\.from)
        uploads = setup[Self.upload].map { u in
            var u = u
            u.caFile = u.caFile.map { PathResolver.resolve($0, relativeTo: setup.baseDirectory) }
            return PartUploads(u)
        }
        splitMicroseconds = split.map { Int64(($0 * 1_000_000).rounded()) }
        keepMicroseconds = setup[Self.keep].map { Int64(($0 * 1_000_000).rounded()) }
        if split != nil { cuttingInput = setup.inputs.firstIndex { $0.format.kind == .encodedVideo } }
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let packet = buffer.packet else { return }
        outlet = out
        try uploads?.checkFailure()
        if file.headerWritten {
            try route(packet, input: input, out)
            return
        }
        if firstStream[input] == nil { firstStream[input] = packet.stream }
        pending.append((input, packet))
        if pending.count > Self.maxPending {
            // An input that neither starts nor ends must not hold the others (and memory) forever.
            let late = firstStream.indices.filter { firstStream[$0] == nil && !ended[$0] }.map { inputNames[$0] }
            out.warning("writing '\(file.path)' without \(late.joined(separator: ", ")): no media from it after \(Self.maxPending) packets of the others")
            try startIfReady(out, force: true)
            return
        }
        try startIfReady(out)
    }

    /// About 10 s of 30 fps video with its audio.
    static let maxPending = 1000
    /// Audio packets held for a keyframe: ~7 min of AAC (~10 MB). An offline run's audio branch
    /// runs ahead of a slow video encoder by as much as its queues allow: the parts must not
    /// depend on that, only a video that stops for minutes may put its audio in the wrong part.
    static let maxHeld = 20_000

    override public func inputEnded(_ input: Int, _ out: Outlet) throws {
        ended[input] = true
        if !file.headerWritten {
            try startIfReady(out)
        } else if input == cuttingInput {
            // No keyframe will come: the other inputs are cut at the multiples themselves.
            cuttingInput = nil
            let waiting = held
            held.removeAll()
            for (i, p) in waiting { try route(p, input: i, out) }
        } else {
            closing?.lagging.remove(input)
            try closeEarlierPartIfCaughtUp(out)
        }
    }

    private func startIfReady(_ out: Outlet, force: Bool = false) throws {
        guard force || firstStream.indices.allSatisfy({ firstStream[$0] != nil || ended[$0] }),
              firstStream.contains(where: { $0 != nil }) else { return }
        try file.start(streams: firstStream)
        if let splitMicroseconds {
            let start = pending.filter { $0.packet.pts != avg_nopts() }.map { $0.packet.mediaStart }.min() ?? 0
            nextCut = start + splitMicroseconds
        }
        let queued = pending
        pending.removeAll()
        for (input, packet) in queued { try route(packet, input: input, out) }
    }

    /// Writes `packet` to the part it belongs to, cutting first when it starts the next one.
    private func route(_ packet: Packet, input: Int, _ out: Outlet) throws {
        guard splitMicroseconds != nil, packet.pts != avg_nopts() else { return try file.write(packet, input: input) }
        let time = packet.microseconds
        if var c = closing, input != cuttingInput {
            // A packet of another input from before the cut, arriving after it: it ends the earlier part.
            if time < c.at { return try c.file.write(packet, input: input) }
            c.lagging.remove(input)
            closing = c
            try closeEarlierPartIfCaughtUp(out)
        }
        if let cutter = cuttingInput {
            if input == cutter {
                if packet.isKeyframe && time >= nextCut {
                    let waiting = held
                    held.removeAll()
                    try cut(at: (packet.pts, packet.timeBase), microseconds: time, out)
                    try file.write(packet, input: input)
                    // What waited for this keyframe goes where its time says (the earlier part, this one, or on waiting).
                    for (i, p) in waiting { try route(p, input: i, out) }
                } else {
                    try file.write(packet, input: input)
                }
            } else if time >= nextCut {
                held.append((input, packet))
                if held.count > Self.maxHeld {
                    // A video that stalls must not hold the audio (and memory) forever: it stays in this part.
                    let oldest = held.removeFirst()
                    try file.write(oldest.packet, input: oldest.input)
                }
            } else {
                try file.write(packet, input: input)
            }
        } else {
            if time >= nextCut { try cut(at: (nextCut, Rational(1, 1_000_000)), microseconds: nextCut, out) }
            try file.write(packet, input: input)
        }
        if closing != nil {
            sinceCut += 1
            // An input that lags the cut by this much is stalled: its earlier part does not wait for it.
            if sinceCut > Self.maxPending { try closeEarlierPart(out) }
        }
    }

    /// Opens the next part, whose 0 is `zero`. The part that ends stays open until every other
    /// input has passed the cut, as their packets from before it may still come.
    private func cut(at zero: (value: Int64, timeBase: Rational), microseconds: Int64, _ out: Outlet) throws {
        guard let splitMicroseconds else { return }
        try closeEarlierPart(out)
        while nextCut <= microseconds { nextCut += splitMicroseconds }
        let streams = firstStream
        let lagging = Set(streams.indices.filter { streams[$0] != nil && !ended[$0] && $0 != cuttingInput })
        closing = (file, microseconds, lagging)
        sinceCut = 0
        file = try RecordingFile(path: parts.path(file.part + 1), part: file.part + 1, container: container, inputs: streams.count, zero: zero)
        try file.start(streams: streams)
    }

    private func closeEarlierPartIfCaughtUp(_ out: Outlet) throws {
        if closing?.lagging.isEmpty == true { try closeEarlierPart(out) }
    }

    private func closeEarlierPart(_ out: Outlet) throws {
        guard let c = closing else { return }
        closing = nil
        try close(c.file, out)
    }

    /// The clean end of one file: finalized, announced, uploaded, and the earlier parts that `keep` no longer wants deleted.
    private func close(_ closing: RecordingFile, _ out: Outlet) throws {
        do {
            try closing.finish(faststart: faststart, fragmented: fragmented)
        } catch {
            closing.close()
            announce(closing, finalized: false, out)
            throw error
        }
        announce(closing, finalized: true, out)
        uploads?.enqueue(closing.path, part: closing.part, out)
        finished.append((closing.path, closing.endMicroseconds))
        if let keepMicroseconds {
            let horizon = closing.endMicroseconds - keepMicroseconds
            let expired = finished.dropLast().filter { $0.end < horizon && uploads?.isSending($0.path) != true }
            for part in expired {
                if unlink(part.path) != 0 && errno != ENOENT {
                    out.warning("keep: cannot delete '\(part.path)': \(String(cString: strerror(errno)))")
                }
            }
            finished.removeAll { part in expired.contains { $0.path == part.path } }
        }
    }

    private func announce(_ file: RecordingFile, finalized: Bool, _ out: Outlet) {
        out.event(RecordingEvent(path: file.path, part: file.part, seconds: file.seconds, bytes: file.bytes,
                                 frames: file.pictures, finalized: finalized))
    }

    override public func finish(_ out: Outlet) throws {
        guard !done else { return }
        done = true
        if !file.headerWritten {
            for i in ended.indices { ended[i] = true }
            try startIfReady(out)
        }
        if !file.headerWritten {
            file.discard()
            out.warning("no media arrived; '\(file.path)' was not written")
            return
        }
        let waiting = held
        held.removeAll()
        for (i, p) in waiting { try file.write(p, input: i) }
        try closeEarlierPart(out)
        try close(file, out)
        try uploads?.finish()
    }

    override public func abort() {
        let earlier = closing?.file
        closing = nil
        guard !done else {
            earlier?.close()
            return file.close()
        }
        done = true
        for left in [earlier, file].compactMap({ $0 }) {
            left.abandon()
            // What the failed run leaves is still a recording (it plays up to its last fragment): said, not finalized.
            if let outlet, FileManager.default.fileExists(atPath: left.path) { announce(left, finalized: false, outlet) }
        }
    }
}

extension Packet {
    /// Presentation time in microseconds: where a split cuts.
    fileprivate var microseconds: Int64 { Rational.rescale(pts, from: timeBase, to: Rational(1, 1_000_000)) }

    /// Where the media of a stream's first packet starts (µs): an audio encoder's first packet
    /// begins with its priming samples, which no player plays (the multiples count from after them).
    fileprivate var mediaStart: Int64 {
        let p = stream.parameters.pointee
        guard stream.kind == .encodedAudio, p.initial_padding > 0, p.sample_rate > 0 else { return microseconds }
        return microseconds + Rational.rescale(Int64(p.initial_padding), from: Rational(1, Int(p.sample_rate)), to: Rational(1, 1_000_000))
    }
}
