import AVGraph
import CFFmpeg
import Foundation

/// `h264`: raw video in, H.264 out, with libx264 through libavcodec. Tags BT.709 limited range and
/// converts other pixel formats to yuv420p on the way in (one swscale pass).
public final class H264Node: Filter, Node {
    public static let typeName = "h264"
    public static let summary = "encodes video to H.264 (libx264)"
    public static let inputs = [PadSpec("in", [.rawVideo], doc: "pictures of one fixed, even size (with passthrough: auto, the size the source sends); yuv420p and nv12 go straight in, other pixel formats are converted")]
    public static let outputs = [PadSpec("out", [.encodedVideo], doc: "H.264 packets, time base 1/frame rate, BT.709 limited range")]

    enum Profile: String, CaseIterable, Sendable { case high, main, baseline }
    enum Preset: String, CaseIterable, Sendable { case ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow, placebo }
    enum Keyframes: String, CaseIterable, Sendable { case auto, fixed }
    enum Tune: String, CaseIterable, Sendable { case film, animation, grain, stillimage, fastdecode, zerolatency, psnr, ssim }
    enum Passthrough: String, CaseIterable, Sendable { case off, auto }

    static let bitrate = Setting.bitrate("bitrate", 10_000...200_000_000, default: "2500k", live: true,
        doc: "average bitrate; while running, takes effect from the next frame (ignored when crf is set)")
    static let maxrate = Setting<Int?>.bitrate("maxrate", 10_000...400_000_000,
        doc: "peak bitrate (VBV); default: the bitrate, so a live stream stays within it. With crf: no cap unless given")
    static let bufsize = Setting<Int?>.bitrate("bufsize", 10_000...800_000_000, doc: "VBV buffer size in bits; default: 2 x maxrate")
    static let gop = Setting<Int?>.int("gop", 1...3000,
        doc: "keyframe interval in frames; default: 2 seconds' worth of frames at the input's frame rate")
    static let bframes = Setting.int("bframes", 0...16, default: 0, doc: "B-frames between references (0 keeps latency and decoders simple)")
    static let profile = Setting.choice("profile", default: Profile.high, doc: "H.264 profile")
    static let preset = Setting.choice("preset", default: Preset.veryfast, doc: "x264 speed/quality preset")
    static let tune = Setting<Tune?>.choice("tune", doc: "x264 tuning; default: none offline, zerolatency in realtime runs unless lookahead is set")
    static let crf = Setting<Double?>.number("crf", 0...51,
        doc: "constant quality (lower is better, 23 is typical) instead of a bitrate; when set, bitrate is ignored. 0 (lossless) needs a profile x264 offers only as High 4:4:4, so check refuses it")
    static let threads = Setting.int("threads", 0...64, default: 0,
        doc: "encoder threads; 0 fits them: two per core offline (at most 16), as many as the pixel rate needs in realtime runs (720p30: one)")
    static let lookahead = Setting<Int?>.int("lookahead", 0...250,
        doc: "frames x264 looks ahead for rate control; default: the preset's (veryfast: 10) offline; in realtime runs none (x264's zerolatency tuning, unless a tune is set: then 1); each 720p frame held costs ~2.8 MB")
    static let keyframes = Setting.choice("keyframes", default: Keyframes.auto,
        doc: "auto: a keyframe at least every gop frames and at scene cuts, where x264 likes; fixed: exactly every gop frames' worth of media time from the first picture and nowhere else (scene cuts off), so encoders fed by one source put keyframes at the same timestamps, as an HLS ladder needs")
    static let adaptive = Setting<[String: OptionValue]?>.fields("adaptive", ["min": .bitrate(10_000...200_000_000)],
        doc: "follow the uplink: the bitrate goes down as soon as a live sink (rtmp, srt) this encoder feeds backs up, to what its link carries, and back up in steps to `bitrate` (the ceiling) once every link is clear; a live sink it feeds keeps at most 0.7 s of video queued; never below min (default: a quarter of bitrate). Each change is a bitrate event; `ctl set` of bitrate sets a new ceiling. Not with crf")
    static let passthrough = Setting.choice("passthrough", default: Passthrough.off,
        doc: "auto: a picture that reaches this encoder as a network source (rtmp, srt) received it, unchanged, goes out as the source's own H.264 packet instead of being encoded; a picture a node changed (the privacy card, a turn, a resize) is encoded at the size the source sends, each span starting with an IDR of ours, and the source's packets resume at its next keyframe (the card stays until then). The output takes the source's picture size, whatever its size option expected, and declares both encoders' parameter sets (avcC), so one track holds both; a phone that turns (a new sequence of another size) is followed, its new parameter sets (and ours at the new size) in band before the keyframes. Encoded spans use x264's zerolatency tuning and CAVLC; a picture shown again (the card held on) goes out as a P picture of skipped macroblocks, with an IDR of x264's every gop; no B-frames, no fixed keyframes. No node reading every picture, the network source does not decode the pictures sent on")
    public static let options = [bitrate.spec, adaptive.spec, maxrate.spec, bufsize.spec, gop.spec, keyframes.spec, bframes.spec, profile.spec, preset.spec,
                                 tune.spec, crf.spec, threads.spec, lookahead.spec, passthrough.spec]
    public static let events: [any NodeEvent.Type] = [LatencyEvent.self, PassthroughEvent.self, BitrateEvent.self]

    /// Passthrough looks only at the pictures it encodes: the source's own, sent on as they came,
    /// need not be decoded at all (the network source then leaves them to decode on request).
    public static func readsPixels(input: Int, options: OptionValues) -> Bool { options[passthrough] != .auto }
    /// Passthrough mostly hands packets on; it encodes only the spans a node changed, and a card
    /// held on costs a skipped picture, not an x264 run (`h265` keeps its own thread: x265 works
    /// on every card picture, some 25 ms each).
    public static func sharesProducerThread(options: OptionValues) -> Bool { options[passthrough] == .auto }
    /// Passthrough keeps the source's pictures as sent: its stream declares their orientation tag.
    public static func orientationHandling(input: Int, options: OptionValues) -> OrientationHandling {
        options[passthrough] == .auto ? .passesOn : .needsUpright
    }

    private var encoder: VideoEncoder
    private var stream: EncodedStream
    private let setup: NodeSetup
    /// `passthrough: auto`: which pictures go out as the source's packets (nil: off).
    private var splice: PassthroughSplice?
    private var spliceDecided = false
    /// Passthrough into the source's avcC: our packets framed with NAL lengths of this size.
    private var nalLengthSize: Int?
    /// Passthrough: the id of our parameter sets, and, once x264 opened again at another size
    /// (the phone turned), its parameter sets to send in band before each IDR of ours (the
    /// header's are the first size's), behind their NAL lengths.
    private var parameterSetID = ourParameterSetID
    private var ourParametersInBand: [UInt8]?
    private var refusedSequence = false
    /// Passthrough: a picture shown again (the card held on) goes out as a skipped P picture of
    /// ours instead of through x264, up to a keyframe a GOP (x264 then starts again with an IDR).
    private var skipped: SkippedPictures?
    private var lastEncoded: Frame?
    private var x264Behind = false
    private var picturesSinceKeyframe = 0
    private var inX264 = 0
    private let gopFrames: Int
    private let timeBase: Rational
    private var converter: PictureConverter?
    private let crfMode: Bool
    private let derivedMaxrate: Bool
    private let derivedBufsize: Bool
    private var timestamps = PictureEncoding.RisingTimestamps()
    /// `adaptive`: the bitrate the live sinks downstream can carry, from what they report.
    private var adaptive: AdaptiveBitrate?
    private let uplink: UplinkFeedback?
    /// WebRTC viewers (`whep`) ask for keyframes here.
    private let keyframeRequests = KeyframeRequests()
    private var lastAdapted = -Double.infinity
    /// `keyframes: fixed`: frames between forced keyframes, and the pts of the next one.
    private let fixedGop: Int64?
    private var nextKeyframe: Int64?
    /// The size x264 encodes at: the input's, or with passthrough the source's pictures'.
    private var width: Int32, height: Int32
    private let pictureFormat: AVPixelFormat
    /// Realtime runs: when each picture (by encoder pts) left its source (the encoder holds a few
    /// at most), and a histogram of source-to-packet latency in half milliseconds, so a run of
    /// any length measures it in constant memory.
    private var emittedAt: [Int64: Double] = [:]
    private var latencyBins: [Int] = []
    private var latencyMax = 0.0
    private static let binsPerSecond = 2000.0

    public init(_ setup: NodeSetup) throws {
        let input = setup.inputs[0].format
        timeBase = input.frameRate.inverse
        width = Int32(input.width)
        height = Int32(input.height)
        // x264 takes both 4:2:0 layouts as they are (NV12 is even its own internal layout); others go through swscale.
        pictureFormat = input.pixelFormat == "nv12" ? AV_PIX_FMT_NV12 : AV_PIX_FMT_YUV420P
        fixedGop = setup[Self.keyframes] == .fixed ? Int64(Self.gopFrames(setup[Self.gop], rate: input.frameRate)) : nil
        gopFrames = Self.gopFrames(setup[Self.gop], rate: input.frameRate)
        crfMode = setup[Self.crf] != nil
        derivedMaxrate = setup[Self.maxrate] == nil && !crfMode
        derivedBufsize = setup[Self.bufsize] == nil
        if let options = setup[Self.adaptive] {
            let bitrate = setup[Self.bitrate]
            var floor = bitrate / 4
            if case .int(let given)? = options["min"] { floor = given }
            adaptive = AdaptiveBitrate(ceiling: bitrate, floor: floor)
            uplink = UplinkFeedback()
        } else {
            uplink = nil
        }
        self.setup = setup
        if setup[Self.passthrough] == .auto {
            splice = PassthroughSplice()
            encoder = try Self.openEncoder(setup, parameterSetID: parameterSetID)
        } else {
            encoder = try Self.openEncoder(setup, parameterSetID: nil)
        }
        stream = EncodedStream(copying: encoder.context, kind: .encodedVideo, uplink: uplink, keyframes: keyframeRequests)
    }

    /// Passthrough: the id our SPS and PPS take, beside a phone's (which number theirs 0); taken
    /// by the source's too, the encoder is opened again with a free one.
    static let ourParameterSetID = 1

    /// libx264 configured from the node's options. `parameterSetID`: passthrough's encoder, which
    /// numbers its parameter sets apart from the source's, makes every forced keyframe an IDR
    /// and puts each picture out before the next comes in (zerolatency: a splice is in order).
    /// `size`: passthrough's, the source's pictures' (default: the input's).
    private static func openEncoder(_ setup: NodeSetup, parameterSetID: Int?, size: (width: Int, height: Int)? = nil) throws -> VideoEncoder {
        var input = setup.inputs[0].format
        if let size { (input.width, input.height) = size }
        let encoder = try VideoEncoder(codecName: "libx264")
        let ctx = encoder.context
        PictureEncoding.describe(ctx, as: input)
        ctx.pointee.pix_fmt = input.pixelFormat == "nv12" ? AV_PIX_FMT_NV12 : AV_PIX_FMT_YUV420P
        let gop = Self.gopFrames(setup[Self.gop], rate: input.frameRate)
        let fixed = setup[Self.keyframes] == .fixed
        // Fixed keyframes are forced by timestamp (receive), so x264 must place none of its own:
        // counting frames would drift from the other renditions after a dropped picture.
        ctx.pointee.gop_size = Int32(fixed ? 3000 : gop)
        ctx.pointee.max_b_frames = Int32(setup[Self.bframes])
        // mp4 and flv keep SPS/PPS in the stream header (extradata), not in every keyframe.
        ctx.pointee.flags |= avg_codec_flag_global_header()
        let threads = setup[Self.threads]
        ctx.pointee.thread_count = Int32(threads > 0 ? threads
            : Self.fittedThreads(width: input.width, height: input.height, rate: input.frameRate.double, realtime: setup.realtime))

        var priv = ["preset": setup[Self.preset].rawValue, "profile": setup[Self.profile].rawValue]
        var params: [String] = []
        if let parameterSetID {
            priv["tune"] = Tune.zerolatency.rawValue
            priv["forced-idr"] = "1"
            // CAVLC: the skipped pictures written by hand (SkippedPictures) need no arithmetic coder.
            priv["coder"] = "cavlc"
            params.append("sps-id=\(parameterSetID)")
        } else {
            switch Self.liveTuning(tune: setup[Self.tune], lookahead: setup[Self.lookahead], realtime: setup.realtime) {
            case .zerolatency: priv["tune"] = Tune.zerolatency.rawValue
            case .lookahead(let l, let sync):
                if let tune = setup[Self.tune] { priv["tune"] = tune.rawValue }
                if let l { priv["rc-lookahead"] = String(l) }
                if !sync { params.append("sync-lookahead=0") }
            }
        }
        if fixed { params.append("scenecut=0:keyint=infinite") }
        if !params.isEmpty { priv["x264-params"] = params.joined(separator: ":") }
        PictureEncoding.rateControl(ctx, options: &priv, bitrate: setup[Self.bitrate], crf: setup[Self.crf], maxrate: setup[Self.maxrate],
                                    bufsize: setup[Self.bufsize], bufferSeconds: setup[Self.adaptive] == nil ? 2 : 1)
        try encoder.open(options: priv)
        return encoder
    }

    override public func set(option: String, to value: OptionValue) throws {
        guard let v = try Self.bitrate.value(in: option, value) else {
            throw MediaError("option '\(option)' cannot be changed while running")
        }
        if crfMode { throw MediaError("bitrate cannot change: this encoder runs in crf mode") }
        // Adaptive: the operator's figure is the new ceiling, applied now and kept (not adapted away upward).
        adaptive?.setCeiling(v)
        apply(bitrate: v)
    }

    /// Seconds of the peak rate x264's VBV buffer holds when `bufsize` is not given: 2 s, but 1 s
    /// when adaptive, so a lower bitrate reaches the wire within a second instead of two.
    private var vbvSeconds: Int { adaptive == nil ? 2 : 1 }

    private func apply(bitrate v: Int) {
        let ctx = encoder.context
        // libx264's wrapper compares these with its own settings before each frame and reconfigures x264.
        ctx.pointee.bit_rate = Int64(v)
        if derivedMaxrate { ctx.pointee.rc_max_rate = Int64(v) }
        if derivedBufsize && ctx.pointee.rc_max_rate > 0 { ctx.pointee.rc_buffer_size = Int32(clamping: Int64(vbvSeconds) * ctx.pointee.rc_max_rate) }
    }

    /// Follows the sinks' readings, at most four times a second (they measure that often).
    private func adapt(_ out: Outlet) {
        guard var controller = adaptive, let uplink else { return }
        let now = UplinkFeedback.now
        guard now - lastAdapted >= LiveSinkCore.measureInterval else { return }
        lastAdapted = now
        let change = controller.update(uplink.current(now: now), now: now)
        adaptive = controller
        guard let change else { return }
        apply(bitrate: change.to)
        out.event(BitrateEvent(from: change.from, to: change.to, reason: change.reason))
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        let pts = timestamps.next(frame, in: timeBase)
        var shown = frame
        var restart = false
        if splice != nil {
            if !spliceDecided {
                try decideSplice(frame, out)
                if frame.orientation != .up { stream = stream.replacingOrientation(frame.orientation) }
            } else {
                splice!.follow(frame) { carries($0, out) }
            }
            let step = splice!.step(frame, reportingTo: out)
            switch step {
            case .forward(let source, let parameters):
                let packet = source.packet.restamped(pts: pts, stream: stream)
                if parameters, let record = AvcConfiguration(source.configuration.bytes) {
                    out.emit(try packet.replacingData(record.inBand + packet.bytes))
                } else {
                    out.emit(packet)
                }
                return
            case .encode(let picture, let idr):
                shown = picture
                restart = idr
            }
            guard PassthroughSplice.loadPixels(shown, for: frame, out) else { return }
            if splice!.resizes(shown, width: width, height: height) {
                try reopen(width: shown.width, height: shown.height, out)
                restart = true
            }
        }
        if skipped != nil, !restart, let last = lastEncoded, Self.samePixels(shown, last), inX264 == 0,
           picturesSinceKeyframe + 1 < gopFrames, let bytes = skipped!.next() {
            let packet = av_packet_alloc()!
            let skip = Packet(owning: packet, stream: stream)
            try BuiltPacket.fill(packet, bytes: bytes[...], stream: 0, pts: pts, dts: pts, key: false)
            packet.pointee.duration = 1
            if out.realtime, let t = frame.emittedAt { record(latency: out.clock - t) }
            picturesSinceKeyframe += 1
            x264Behind = true
            out.emit(skip)
            return
        }
        if splice != nil {
            lastEncoded = shown
            // x264 did not see the skipped pictures: its next one starts again, as an IDR.
            if x264Behind || picturesSinceKeyframe + 1 >= gopFrames { restart = true }
            x264Behind = false
        }
        let picture = try PictureEncoding.fitted(shown, for: frame, width: width, height: height, format: pictureFormat, converter: &converter)
        picture.av.pointee.pts = pts
        if keyframeRequests.take() { restart = true }
        picture.av.pointee.pict_type = forcesKeyframe(at: pts) || restart ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        if out.realtime, let t = frame.emittedAt { emittedAt[pts] = t }
        adapt(out)
        try encoder.send(picture.av)
        inX264 += 1
        try drain(out)
    }

    /// The same pixels (one buffer shown again, as the privacy node shows its card).
    private static func samePixels(_ a: Frame, _ b: Frame) -> Bool {
        a.av.pointee.buf.0 != nil && a.av.pointee.buf.0?.pointee.buffer == b.av.pointee.buf.0?.pointee.buffer
            && a.av.pointee.data.0 == b.av.pointee.data.0 && a.width == b.width && a.height == b.height && a.av.pointee.format == b.av.pointee.format
    }

    /// Passthrough, at the first picture: when it is a network source's H.264 picture, x264
    /// takes its size (whatever size `check` expected) and the output declares the source's
    /// parameter sets and ours side by side (ours renumbered if the source took our id), so
    /// either encoder's pictures decode in one track, at the size the source sends.
    /// Otherwise every picture is encoded, and the warning says why.
    private func decideSplice(_ frame: Frame, _ out: Outlet) throws {
        spliceDecided = true
        func refuse(_ why: String) { PassthroughSplice.refuse(why, out) }
        guard let source = PassthroughSplice.firstSource(frame, out) else { return }
        guard source.codec == "h264", let theirs = AvcConfiguration(source.configuration.bytes) else {
            return refuse("the source sends \(source.codec), not H.264 with an avcC record")
        }
        guard var ours = AvcConfiguration(annexB: stream.extradata) else { return refuse("x264 gave no parameter sets") }
        let collides = !theirs.sequenceIDs.isDisjoint(with: ours.sequenceIDs) || !theirs.pictureIDs.isDisjoint(with: ours.pictureIDs)
        if collides || frame.width != Int(width) || frame.height != Int(height) {
            if collides {
                guard let id = theirs.freeID() else { return refuse("the source takes every parameter set id") }
                parameterSetID = id
            }
            encoder = try Self.openEncoder(setup, parameterSetID: parameterSetID, size: (frame.width, frame.height))
            (width, height) = (Int32(frame.width), Int32(frame.height))
            stream = EncodedStream(copying: encoder.context, kind: .encodedVideo, uplink: uplink, keyframes: keyframeRequests)
            guard let reopened = AvcConfiguration(annexB: stream.extradata) else { return refuse("x264 gave no parameter sets") }
            ours = reopened
        }
        guard let merged = theirs.merged(with: ours) else {
            return refuse("the source's avcC (NAL length \(theirs.lengthSize) bytes) cannot hold x264's (NAL length 4 bytes, ids \(ours.sequenceIDs.sorted())) beside it")
        }
        stream = try stream.replacingExtradata(merged.bytes)
        splice!.start(source.configuration)
        skipped = SkippedPictures(sps: ours.sequenceSets[0], pps: ours.pictureSets[0], nalLengthSize: theirs.lengthSize)
        // The muxers take an avcC stream's packets as they are: ours must be framed like the source's.
        nalLengthSize = theirs.lengthSize
    }

    /// Passthrough: whether the track can carry the source's new sequence (the phone turned):
    /// its packets framed as the header says, its parameter set ids apart from ours (they go in
    /// band, and ours stay valid beside them). Otherwise its pictures are encoded, with a warning.
    private func carries(_ configuration: SourceConfiguration, _ out: Outlet) -> Bool {
        let theirs = AvcConfiguration(configuration.bytes)
        if let theirs, theirs.lengthSize == nalLengthSize, !theirs.sequenceIDs.contains(parameterSetID), !theirs.pictureIDs.contains(parameterSetID) {
            return true
        }
        if !refusedSequence {
            refusedSequence = true
            out.warning("passthrough: the source started a new sequence the track cannot carry beside ours "
                        + "(\(theirs.map { "NAL length \($0.lengthSize) bytes, ids \($0.sequenceIDs.sorted())" } ?? "no avcC record")); its pictures are encoded")
        }
        return false
    }

    /// Passthrough: x264 opened again at the size of the picture to encode (the phone turned),
    /// after what it holds went out. Its parameter sets, which the header does not declare,
    /// go in band before each IDR of ours from now on.
    private func reopen(width w: Int, height h: Int, _ out: Outlet) throws {
        try encoder.send(nil)
        try drain(out)
        encoder = try Self.openEncoder(setup, parameterSetID: parameterSetID, size: (w, h))
        (width, height) = (Int32(w), Int32(h))
        converter = nil
        lastEncoded = nil
        x264Behind = false
        inX264 = 0
        guard let ours = AvcConfiguration(annexB: EncodedStream(copying: encoder.context, kind: .encodedVideo).extradata),
              let nalLengthSize else { throw MediaError("passthrough: x264 gave no parameter sets at \(w)x\(h)") }
        ourParametersInBand = AvcConfiguration.lengthPrefixed(units: ours.sequenceSets + ours.pictureSets, lengthSize: nalLengthSize)
        skipped = SkippedPictures(sps: ours.sequenceSets[0], pps: ours.pictureSets[0], nalLengthSize: nalLengthSize)
    }

    /// `keyframes: fixed`: the first picture at or after each multiple of the GOP from the first one.
    private func forcesKeyframe(at pts: Int64) -> Bool {
        guard let fixedGop else { return false }
        guard let next = nextKeyframe else { nextKeyframe = pts + fixedGop; return true }
        guard pts >= next else { return false }
        nextKeyframe = next + (pts - next) / fixedGop * fixedGop + fixedGop
        return true
    }

    override public func finish(_ out: Outlet) throws {
        try encoder.send(nil)
        try drain(out)
        reportLatency(out)
        if let splice { out.event(splice.event) }
    }

    /// Source emission to encoded packet, over the run: the figure a live viewer's delay starts from.
    private func reportLatency(_ out: Outlet) {
        let count = latencyBins.reduce(0, +)
        guard count > 0 else { return }
        func percentile(_ p: Double) -> Double {
            let rank = Int((p * Double(count)).rounded(.up))
            var seen = 0
            for (bin, n) in latencyBins.enumerated() {
                seen += n
                if seen >= rank { return bin == latencyBins.count - 1 ? latencyMax * 1000 : (Double(bin) + 0.5) / Self.binsPerSecond * 1000 }
            }
            return latencyMax * 1000
        }
        out.event(LatencyEvent(count: count, p50: percentile(0.5), p99: percentile(0.99), max: latencyMax * 1000))
    }

    private func record(latency: Double) {
        if latencyBins.isEmpty { latencyBins = Array(repeating: 0, count: 8001) }
        latencyBins[min(latencyBins.count - 1, max(0, Int(latency * Self.binsPerSecond)))] += 1
        latencyMax = max(latencyMax, latency)
    }

    private func drain(_ out: Outlet) throws {
        while let packet = try encoder.receive() {
            // One frame per tick of the time base: muxers use it for the last frame's length.
            if packet.pointee.duration <= 0 { packet.pointee.duration = 1 }
            if let t = emittedAt.removeValue(forKey: packet.pointee.pts) { record(latency: out.clock - t) }
            let encoded = Packet(owning: packet, stream: stream)
            if encoded.isKeyframe { keyframeRequests.keyframeMade() }
            inX264 = max(0, inX264 - 1)
            // Passthrough reads x264's picture twice (its frame_num, its NAL units): one copy of it.
            let annexB = skipped != nil || nalLengthSize != nil ? encoded.bytes : []
            if skipped != nil {
                skipped!.noteEncoded(annexB: annexB)
                picturesSinceKeyframe = encoded.isKeyframe ? 0 : picturesSinceKeyframe + 1
            }
            if let nalLengthSize {
                let inBand = encoded.isKeyframe ? ourParametersInBand ?? [] : []
                out.emit(try encoded.replacingData(inBand + AvcConfiguration.lengthPrefixed(annexB: annexB, lengthSize: nalLengthSize)))
            } else {
                out.emit(encoded)
            }
        }
    }
}
