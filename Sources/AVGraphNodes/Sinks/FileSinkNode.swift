import AVGraph
import CFFmpeg
import Foundation

/// `file` as a sink: muxes encoded streams into a file whose extension names the container.
/// The header waits until every input has delivered its first packet (or ended), because the
/// streams are described by those packets.
///
/// The file is a journal while it is recorded: MP4/MOV are written as fragments of at most
/// a second, and each fragment (each packet for other containers) reaches the file whole, so
/// whatever ends the process (kill -9, out of memory, a power cut) leaves a file that plays up
/// to its last second or so. A full disk cuts the file back to its last complete fragment and
/// stops the run. At a clean end an MP4 is rewritten as a regular one with its index in front
/// (to a temporary, then renamed over the journal), unless `fragmented` asks to leave it as is.
public final class FileSinkNode: Sink, Node {
    public static let typeName = "file"
    public static let summary = "writes encoded streams to a media file (.mp4 .mov .mkv .flv .ts)"
    public static let inputs = [PadSpec("in", [.encodedVideo, .encodedAudio], variadic: true,
                                        doc: "encoded video and audio streams; one file stream each, in this order")]
    static let path = Setting.path("path", mustExist: false, required: true,
        doc: "the file to write, relative to the .pipe file; its extension picks the container (.mp4 .mov .mkv .flv .ts); missing folders are created")
    static let faststart = Setting.bool("faststart", default: true,
        doc: "mp4/mov: at a clean end, put the index (moov) before the media so playback starts before the download ends (false: after it); ignored by other containers")
    static let fragmented = Setting.bool("fragmented", default: false,
        doc: "mp4/mov: leave the file fragmented as recorded (fragments of <= 1 s) instead of rewriting it as a regular MP4 at a clean end; either way it is recorded fragmented, so it plays after a crash")
    static let overwrite = Setting.bool("overwrite", default: false, doc: "replace an existing file instead of refusing to run")
    static let upload = Setting<UploadTarget?>.upload("upload",
        doc: "after the file is finalized, send it with one HTTP request (body streamed from disk), retried with backoff; event `uploaded`; a failed upload keeps the file and fails the run; https checks the server's certificate (system authorities, or `ca`: a PEM file)")
    public static let options = [path.spec, faststart.spec, fragmented.spec, overwrite.spec, upload.spec]

    static var extensionsText: String { Muxer.containers.map { ".\($0.ext)" }.joined(separator: ", ") }

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let path = n.path(Self.path) else { throw NegotiationError("needs a path", option: "path") }
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
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir) {
            if isDir.boolValue { throw NegotiationError("'\(path)' is a folder", option: "path") }
            if !n[Self.overwrite] {
                throw NegotiationError("'\(path)' already exists", option: "path", hint: "set overwrite: true to replace it, or pick another path")
            }
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

    private let muxer: Muxer
    private let container: String
    private let faststart: Bool
    private let fragmented: Bool
    /// Per input: its stream in the file once the header is out.
    private var streamIndex: [Int?]
    private var firstStream: [EncodedStream?]
    private var ended: [Bool]
    /// Packets that arrived before the header could be written.
    private var pending: [(input: Int, packet: Packet)] = []
    private var done = false
    private let inputNames: [String]
    private let upload: UploadTarget?

    public init(_ setup: NodeSetup) throws {
        let path = setup.path(Self.path) ?? ""
        guard let container = Muxer.formatName(forPath: path) else { throw MediaError("unknown container for '\(path)'") }
        if FileManager.default.fileExists(atPath: path) && !setup[Self.overwrite] {
            throw MediaError("'\(path)' already exists (set overwrite: true to replace it)")
        }
        let folder = (path as NSString).deletingLastPathComponent
        // Like ffmpeg, a missing folder is the user's to create: a typo in a path must not scatter folders.
        if !folder.isEmpty && !FileManager.default.fileExists(atPath: folder) {
            throw MediaError("cannot write '\(path)': the folder '\(folder)' does not exist")
        }
        self.container = container
        muxer = try Muxer(journalAt: path, format: container)
        // A run killed while finalizing this path left its half-made copy.
        unlink(Self.temporary(for: path))
        faststart = setup[Self.faststart]
        fragmented = setup[Self.fragmented]
        streamIndex = Array(repeating: nil, count: setup.inputs.count)
        firstStream = Array(repeating: nil, count: setup.inputs.count)
        ended = Array(repeating: false, count: setup.inputs.count)
        inputNames = setup.inputs.map(\.from)
        upload = setup[Self.upload].map { u in
            var u = u
            u.caFile = u.caFile.map { PathResolver.resolve($0, relativeTo: setup.baseDirectory) }
            return u
        }
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let packet = buffer.packet else { return }
        if muxer.headerWritten {
            try write(packet, input: input)
            return
        }
        if firstStream[input] == nil { firstStream[input] = packet.stream }
        pending.append((input, packet))
        if pending.count > Self.maxPending {
            // An input that neither starts nor ends must not hold the others (and memory) forever.
            let late = firstStream.indices.filter { firstStream[$0] == nil && !ended[$0] }.map { inputNames[$0] }
            out.warning("writing '\(muxer.path)' without \(late.joined(separator: ", ")): no media from it after \(Self.maxPending) packets of the others")
            try startIfReady(force: true)
            return
        }
        try startIfReady()
    }

    static let fragmentMicroseconds = 1_000_000

    private var isMP4: Bool { container == "mp4" || container == "mov" }

    /// About 10 s of 30 fps video with its audio.
    static let maxPending = 1000

    override public func inputEnded(_ input: Int, _ out: Outlet) throws {
        ended[input] = true
        if !muxer.headerWritten { try startIfReady() }
    }

    private func startIfReady(force: Bool = false) throws {
        guard force || firstStream.indices.allSatisfy({ firstStream[$0] != nil || ended[$0] }),
              firstStream.contains(where: { $0 != nil }) else { return }
        for (i, s) in firstStream.enumerated() {
            if let s { streamIndex[i] = try muxer.addStream(s.parameters, timeBase: s.timeBase) }
        }
        var options: [String: String] = [:]
        if isMP4 {
            // A fragment at each keyframe and at least every second: a crash loses at most that.
            options["movflags"] = "frag_keyframe+empty_moov+delay_moov+default_base_moof"
            options["frag_duration"] = String(Self.fragmentMicroseconds)
        }
        try muxer.writeHeader(options: options)
        let queued = pending
        pending.removeAll()
        for (input, packet) in queued { try write(packet, input: input) }
    }

    private func write(_ packet: Packet, input: Int) throws {
        guard let index = streamIndex[input] else { return }
        try muxer.write(packet.av, timeBase: packet.timeBase, stream: index)
    }

    override public func finish(_ out: Outlet) throws {
        guard !done else { return }
        done = true
        if !muxer.headerWritten {
            for i in ended.indices { ended[i] = true }
            try startIfReady()
        }
        if !muxer.headerWritten {
            muxer.discard()
            out.warning("no media arrived; '\(muxer.path)' was not written")
            return
        }
        try muxer.finish()
        if isMP4 && !fragmented { try rewriteRegular() }
        finalized(out)
        if let upload { try Upload(target: upload).send(muxer.path, out) }
    }

    /// The clean end of an MP4: the fragments become a regular file, index in front (faststart)
    /// or behind. Written beside the journal and renamed over it, so an interruption (a signal,
    /// a full disk) leaves the fragmented journal, which plays.
    private func rewriteRegular() throws {
        let path = muxer.path
        let temporary = Self.temporary(for: path)
        do {
            try JournalFile.replace(path, with: temporary) {
                try Remuxer.copy(from: path, to: temporary, format: container, options: faststart ? ["movflags": "+faststart"] : [:])
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
    private static func explain(_ error: Error) -> String {
        let text = "\(error)"
        if text.contains(String(cString: strerror(ENOSPC))) { return "the disk is full (\(text))" }
        return text
    }

    /// The one place where the file is done: complete, in its final form, at its path.
    private func finalized(_ out: Outlet) {}

    override public func abort() {
        guard !done else {
            if !muxer.closed { try? muxer.finish() }
            return
        }
        done = true
        // Left as recorded (fragmented, or cut back to its last whole fragment after a write
        // failure); a file that a failure left empty is not a recording.
        let empty = muxer.journal.map { $0.failure != nil && $0.safeEnd == 0 } ?? false
        if muxer.headerWritten && !empty { try? muxer.finish() } else { muxer.discard() }
    }
}
