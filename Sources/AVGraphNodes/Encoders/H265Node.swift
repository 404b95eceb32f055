import AVGraph
import CFFmpeg
import Foundation

/// `h265`: raw video in, HEVC out, with libx265 through libavcodec. Its reason to be is a phone
/// that publishes HEVC (Enhanced RTMP): with `passthrough: auto` the phone's own packets are
/// recorded as they came and only the pictures a node changed (the privacy card) are encoded.
public final class H265Node: Filter, Node {
    public static let typeName = "h265"
    public static let summary = "encodes video to HEVC (libx265); with passthrough: auto, sends a phone's own HEVC on"
    public static let inputs = [PadSpec("in", [.rawVideo], doc: "pictures of one fixed, even size (with passthrough: auto, the size the source sends); yuv420p goes straight in, other pixel formats are converted")]
    public static let outputs = [PadSpec("out", [.encodedVideo], doc: "HEVC packets, time base 1/frame rate, BT.709 limited range")]

    enum Preset: String, CaseIterable, Sendable { case ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow, placebo }
    typealias Passthrough = H264Node.Passthrough

    static let bitrate = Setting.bitrate("bitrate", 10_000...200_000_000, default: "2500k", doc: "average bitrate (ignored when crf is set)")
    // The same rate, keyframe and B-frame options as h264's.
    static let maxrate = H264Node.maxrate
    static let bufsize = H264Node.bufsize
    static let gop = H264Node.gop
    static let bframes = H264Node.bframes
    static let preset = Setting.choice("preset", default: Preset.ultrafast,
        doc: "x265 speed/quality preset (x265 costs several times x264's CPU at the same preset: ultrafast is the realtime one on small machines)")
    static let crf = Setting<Double?>.number("crf", 0...51, doc: "constant quality (lower is better, 28 is x265's default) instead of a bitrate")
    static let passthrough = Setting.choice("passthrough", default: Passthrough.off,
        doc: "auto: a picture that reaches this encoder as a network source (rtmp, Enhanced RTMP HEVC) received it, unchanged, goes out as the source's own HEVC packet instead of being encoded; a picture a node changed (the privacy card, a turn, a resize) is encoded at the size the source sends, each span starting with an IDR of ours, and the source's packets resume at its next keyframe (IDR or CRA; the card stays until then). The output takes the source's picture size, whatever its size option expected, declares the source's hvcC, and each encoder's parameter sets go in band before its keyframes (MP4: hev1); a phone that turns (a new sequence of another size) is followed. Encoded spans use x265's zerolatency tuning; no B-frames")
    public static let options = [bitrate.spec, maxrate.spec, bufsize.spec, gop.spec, bframes.spec, preset.spec, crf.spec, passthrough.spec]
    public static let events: [any NodeEvent.Type] = [PassthroughEvent.self]

    /// Passthrough looks only at the pictures it encodes (see `H264Node.readsPixels`).
    public static func readsPixels(input: Int, options: OptionValues) -> Bool { options[passthrough] != .auto }

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let input = try PictureEncoding.input(n, name: typeName, passthrough: n[Self.passthrough] == .auto)
        if n[Self.passthrough] == .auto, n[Self.bframes] > 0 {
            throw NegotiationError("passthrough splices pictures in decode order: no B-frames", option: "bframes", hint: "set bframes: 0")
        }
        try PictureEncoding.checkRates(crf: n[Self.crf], maxrate: n[Self.maxrate], bitrate: n[Self.bitrate])
        return [try PictureEncoding.output(input, codec: "hevc", encoder: "libx265", profile: "main", bitRate: n[Self.crf] == nil ? n[Self.bitrate] : 0,
                                                 passthrough: n[Self.passthrough] == .auto)]
    }

    private var encoder: VideoEncoder
    private var stream: EncodedStream
    private let setup: NodeSetup
    /// `passthrough: auto`: which pictures go out as the source's packets (nil: off).
    private var splice: PassthroughSplice?
    private var spliceDecided = false
    /// Passthrough into the source's hvcC: its NAL length size and parameter sets, which go in
    /// band again before a source keyframe that follows pictures of ours.
    private var source: HevcConfiguration?
    private var oursSinceSourcePicture = false
    private var refusedSequence = false
    private let timeBase: Rational
    /// The size x265 encodes at: the input's, or with passthrough the source's pictures'.
    private var width: Int32, height: Int32
    private var converter: PictureConverter?
    private var timestamps = PictureEncoding.RisingTimestamps()

    public init(_ setup: NodeSetup) throws {
        let input = setup.inputs[0].format
        timeBase = input.frameRate.inverse
        width = Int32(input.width)
        height = Int32(input.height)
        self.setup = setup
        if setup[Self.passthrough] == .auto { splice = PassthroughSplice() }
        // Opened for a stream header of its own; passthrough opens it again, in band, once it
        // knows the source takes the splice (at the first picture).
        encoder = try Self.openEncoder(setup, inBand: false)
        stream = EncodedStream(copying: encoder.context, kind: .encodedVideo)
    }

    /// libx265 configured from the node's options. `inBand`: passthrough's encoder, which puts its
    /// VPS/SPS/PPS before each of its keyframes (the output's header is the source's), makes
    /// every forced keyframe an IDR and puts each picture out before the next comes in.
    /// `size`: passthrough's, the source's pictures' (default: the input's).
    private static func openEncoder(_ setup: NodeSetup, inBand: Bool, size: (width: Int, height: Int)? = nil) throws -> VideoEncoder {
        var input = setup.inputs[0].format
        if let size { (input.width, input.height) = size }
        let encoder = try VideoEncoder(codecName: "libx265")
        let ctx = encoder.context
        PictureEncoding.describe(ctx, as: input)
        ctx.pointee.pix_fmt = AV_PIX_FMT_YUV420P
        ctx.pointee.gop_size = Int32(H264Node.gopFrames(setup[Self.gop], rate: input.frameRate))
        ctx.pointee.max_b_frames = Int32(setup[Self.bframes])
        // Without a global header libx265 repeats the parameter sets before every keyframe.
        if !inBand { ctx.pointee.flags |= avg_codec_flag_global_header() }
        // x265 prints its banner and settings to stderr itself (not through av_log).
        var params = ["log-level=error", "bframes=\(setup[Self.bframes])"]
        var priv = ["preset": setup[Self.preset].rawValue]
        if inBand || setup.realtime { priv["tune"] = "zerolatency" }
        if inBand {
            priv["forced-idr"] = "1"
            // x265's own keyframes in a span as IDRs too: a CRA of ours would be a second kind to splice.
            params.append("open-gop=0")
        }
        PictureEncoding.rateControl(ctx, options: &priv, bitrate: setup[Self.bitrate], crf: setup[Self.crf], maxrate: setup[Self.maxrate],
                                    bufsize: setup[Self.bufsize], bufferSeconds: 2)
        priv["x265-params"] = params.joined(separator: ":")
        try encoder.open(options: priv)
        return encoder
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        let pts = timestamps.next(frame, in: timeBase)
        guard let (shown, restart) = try splice(frame, pts: pts, out) else { return }
        let picture = try PictureEncoding.fitted(shown, for: frame, width: width, height: height, format: AV_PIX_FMT_YUV420P, converter: &converter)
        picture.av.pointee.pts = pts
        picture.av.pointee.pict_type = restart ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        try encoder.send(picture.av)
        try drain(out)
    }

    /// The picture to encode in `frame`'s place and whether as an IDR of ours; nil when the
    /// source's packet went out instead (passthrough), or a source picture did not decode.
    private func splice(_ frame: Frame, pts: Int64, _ out: Outlet) throws -> (Frame, restart: Bool)? {
        guard splice != nil else { return (frame, false) }
        if !spliceDecided {
            try decideSplice(frame, out)
        } else {
            splice!.follow(frame) { carries($0, out) }
        }
        let step = splice!.step(frame, reportingTo: out)
        guard case .encode(let shown, var restart) = step else {
            guard case .forward(let picture, let parameters) = step else { return nil }
            var packet = picture.packet.restamped(pts: pts, stream: stream)
            if parameters, let turned = HevcConfiguration(picture.configuration.bytes) { source = turned }
            if oursSinceSourcePicture || parameters, let source {
                let bytes = packet.bytes
                packet = try packet.replacingData(source.resumption(before: bytes) + bytes)
            }
            oursSinceSourcePicture = false
            out.emit(packet)
            return nil
        }
        oursSinceSourcePicture = true
        guard PassthroughSplice.loadPixels(shown, for: frame, out) else { return nil }
        if splice!.resizes(shown, width: width, height: height) {
            // The phone turned: x265 again at the new size (its parameter sets go in band anyway).
            try encoder.send(nil)
            try drain(out)
            encoder = try Self.openEncoder(setup, inBand: true, size: (shown.width, shown.height))
            (width, height) = (Int32(shown.width), Int32(shown.height))
            converter = nil
            restart = true
        }
        return (shown, restart)
    }

    /// Passthrough: whether the track can carry the source's new sequence (the phone turned):
    /// an hvcC whose packets are framed as the header says (its parameter sets go in band).
    private func carries(_ configuration: SourceConfiguration, _ out: Outlet) -> Bool {
        let theirs = HevcConfiguration(configuration.bytes)
        if let theirs, theirs.lengthSize == source?.lengthSize { return true }
        if !refusedSequence {
            refusedSequence = true
            out.warning("passthrough: the source started a new sequence the track cannot carry "
                        + "(\(theirs.map { "NAL length \($0.lengthSize) bytes" } ?? "no hvcC record")); its pictures are encoded")
        }
        return false
    }

    /// Passthrough, at the first picture: when it is a network source's HEVC picture, the
    /// output declares the source's hvcC and x265 is opened again at the source's size (whatever
    /// size `check` expected) to put its own parameter sets in band. Otherwise every picture is
    /// encoded, and the warning says why.
    private func decideSplice(_ frame: Frame, _ out: Outlet) throws {
        spliceDecided = true
        guard let picture = PassthroughSplice.firstSource(frame, out) else { return }
        guard picture.codec == "hevc", let theirs = HevcConfiguration(picture.configuration.bytes) else {
            return PassthroughSplice.refuse("the source sends \(picture.codec), not HEVC with an hvcC record", out)
        }
        encoder = try Self.openEncoder(setup, inBand: true, size: (frame.width, frame.height))
        (width, height) = (Int32(frame.width), Int32(frame.height))
        stream = try EncodedStream(copying: encoder.context, kind: .encodedVideo).replacingExtradata(picture.configuration.bytes)
        splice!.start(picture.configuration)
        source = theirs
    }

    override public func finish(_ out: Outlet) throws {
        try encoder.send(nil)
        try drain(out)
        if let splice { out.event(splice.event) }
    }

    private func drain(_ out: Outlet) throws {
        while let packet = try encoder.receive() {
            // One frame per tick of the time base: muxers use it for the last frame's length.
            if packet.pointee.duration <= 0 { packet.pointee.duration = 1 }
            let encoded = Packet(owning: packet, stream: stream)
            if let source {
                // The output is framed as the source's hvcC says: NAL units behind their lengths.
                out.emit(try encoded.replacingData(AvcConfiguration.lengthPrefixed(annexB: encoded.bytes, lengthSize: source.lengthSize)))
            } else {
                out.emit(encoded)
            }
        }
    }
}

extension H265Node: DeclaresBitrate {
    /// The VBV peak when given, else the average bitrate (with crf a guess: the stream is not capped).
    public static func bitrateCeiling(_ options: OptionValues) -> Int? { options[maxrate] ?? options[bitrate] }
}

extension H265Node: PassesSourcePackets {
    public static func passesSourcePackets(_ options: OptionValues) -> Bool { options[passthrough] == .auto }
}
