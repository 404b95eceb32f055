import AVGraph
import AVGraphTransport
import CFFmpeg
import Foundation

extension NetworkReader {
    /// The decoding thread: packets from the backlog, frames to the hub, each session's decoders
    /// drained when its stream ends (or the next session begins, or the reader stops).
    func decode() {
        func drain(_ current: SessionDecoding?) {
            guard let c = current else { return }
            do {
                for pad in 0..<2 where c.decoders[pad] != nil {
                    try c.decoders[pad]!.send(nil)
                    try push(c, pad)
                }
            } catch {
                note(.warning("decoding the stream from \(shownURL) failed (session \(c.session)): \(error)"))
            }
        }
        while let item = backlog.next() {
            defer { backlog.finished() }
            switch item {
            case .begin(let next):
                currentSession.withLock { current in
                    drain(current)
                    current = next
                }
            case .end(let session):
                currentSession.withLock { current in
                    if current?.session == session {
                        drain(current)
                        current = nil
                    }
                }
                sessionDelivered(session)
            case .packet(let packet, let pad):
                defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
                currentSession.withLock { current in
                    guard let c = current else { return }
                    decode(packet, pad: pad, c)
                }
            }
        }
        if !cancel.isCancelled { currentSession.withLock { drain($0) } }
        backlog.discard()
    }

    /// One packet of session `c`: its frame (pending or decoded) to the hub.
    func decode(_ packet: UnsafeMutablePointer<AVPacket>, pad: Int, _ c: SessionDecoding) {
        guard c.healthy else { return }
        do {
            if pad == 0, c.picturesOnRequest != nil {
                if let pending = try c.pendingPicture(packet) {
                    hub.pushDecoded(pending.frame, pad: 0, time: pending.time, sent: pending.sent, session: c.session, cancel: cancel)
                }
                if c.picturesOnRequest != nil { return }
                // A reordered packet: from here on, the session decodes every picture.
                note(.warning("the stream from \(shownURL) reorders its pictures (B-frames): every picture is decoded from here on"))
                try push(c, pad)
            }
            if pad == 1, let pending = c.samplesOnRequest?.pending(packet) {
                let (time, sent) = c.stamp(pts: packet.pointee.pts, duration: pending.duration, pad: 1)
                hub.pushDecoded(pending.frame, pad: 1, time: time, sent: sent, session: c.session, cancel: cancel)
                return
            }
            c.keepSourcePacket(packet, pad: pad)
            try c.decoders[pad]?.send(packet)
            try push(c, pad)
        } catch {
            c.healthy = false
            note(.warning("decoding the stream from \(shownURL) failed (session \(c.session)): \(error)"))
        }
    }

    /// Frames out of one decoder to the hub, stamped with the media time since the session's
    /// first frame laid on the wall clock from the moment the publisher connected: a live
    /// publisher sends as it goes, so that is when each was sent, and a reconnect's gap on the
    /// run's clock is the gap the publisher left.
    func push(_ c: SessionDecoding, _ pad: Int) throws {
        guard let decoder = c.decoders[pad] else { return }
        let timeBase = c.timeBases[pad]
        while let av = try decoder.receive() {
            // A display orientation SEI holds for the pictures after it until the next one says otherwise.
            if pad == 0 { c.orientation = Self.orientation(av, c.orientation) } else { c.samplesOnRequest?.check(av) }
            let frame = Frame(owning: av, timeBase: timeBase, orientation: pad == 0 ? c.orientation : .up)
            frame.source = c.sourcePacket(pts: av.pointee.pts, pad: pad)
            var pts = av.pointee.best_effort_timestamp
            if pts == avg_nopts() { pts = av.pointee.pts }
            if c.alreadyPending(pad: pad, pts: pts) { continue }
            let duration = av.pointee.nb_samples > 0
                ? av_rescale_q(Int64(av.pointee.nb_samples), AVRational(num: 1, den: max(av.pointee.sample_rate, 1)), timeBase.av)
                : av.pointee.pkt_duration
            let (time, sent) = c.stamp(pts: pts, duration: duration, pad: pad)
            av.pointee.pict_type = AV_PICTURE_TYPE_NONE
            hub.pushDecoded(frame, pad: pad, time: time, sent: sent, session: c.session, cancel: cancel)
        }
    }

    /// A picture's own display matrix (H.264 display orientation SEI) wins over what held before.
    private static func orientation(_ av: UnsafeMutablePointer<AVFrame>, _ stream: Orientation) -> Orientation {
        guard let sd = av_frame_get_side_data(av, AV_FRAME_DATA_DISPLAYMATRIX), sd.pointee.size >= 36 else { return stream }
        return Orientation(displayMatrix: UnsafeRawPointer(sd.pointee.data))
    }
}

/// One publisher session's decoders and timing, used by one thread at a time: the one holding
/// `NetworkReader.currentSession` (the decoding thread, or the reader handing on a pending frame).
// @unchecked: its mutable state is only touched under that lock.
final class SessionDecoding: @unchecked Sendable {
    let session: Int
    let connectedAt: Double
    private(set) var decoders: [Decoder?]
    let timeBases: [Rational]
    var orientation: Orientation
    var first: Double?
    var next: [Int64?] = [nil, nil]
    var healthy = true
    /// The streams as received (video, audio), for the packets handed on with their frames.
    private let streams: [EncodedStream?]
    private var configurations: [SourceConfiguration?]
    private var sequences = [0, 0]
    /// Packets sent to a decoder whose frames have not come out yet, by pts (per pad).
    private var waiting: [[Int64: SourcePicture]] = [[:], [:]]
    /// Video not decoded here: pictures go out pending, decoded when a node asks (nil: decoded here).
    private(set) var picturesOnRequest: PicturesOnRequest?
    /// Audio not decoded here once its first frames are checked (nil: decoded here).
    let samplesOnRequest: SamplesOnRequest?
    /// Makes the video decoder, should the session have to decode every picture after all.
    private let videoDecoder: (EncodedStream) throws -> Decoder
    /// The packets since the last keyframe, which pending pictures are decoded from.
    private var run: PicturesOnRequest.Run?
    private var pictureSize: (configuration: SourceConfiguration, width: Int, height: Int)?
    /// The last pending picture's pts: a decoder that takes over decodes its run again, and what
    /// it gives up to there went out already.
    private var lastPending: Int64?

    init(session: Int, connectedAt: Double, decoders: [Decoder?], timeBases: [Rational], orientation: Orientation,
         video: EncodedStream? = nil, audio: EncodedStream? = nil, picturesOnRequest: PicturesOnRequest? = nil,
         samplesOnRequest: SamplesOnRequest? = nil,
         videoDecoder: @escaping (EncodedStream) throws -> Decoder = { _ in throw MediaError("no video decoder") }) {
        self.session = session
        self.connectedAt = connectedAt
        self.decoders = decoders
        self.timeBases = timeBases
        self.orientation = orientation
        streams = [video, audio]
        configurations = streams.map { $0.map { SourceConfiguration(bytes: $0.extradata) } }
        self.picturesOnRequest = picturesOnRequest
        self.samplesOnRequest = samplesOnRequest
        self.videoDecoder = videoDecoder
    }

    /// Media time of a frame at `pts` (`duration` long) and when the publisher sent it: the media
    /// time since the session's first frame laid on the wall clock from the moment the publisher
    /// connected (a live publisher sends as it goes).
    func stamp(pts given: Int64, duration: Int64, pad: Int) -> (time: Double, sent: Double) {
        // MPEG-TS stamps only the first of the audio frames in a PES packet: the rest follow on.
        let pts = given == avg_nopts() ? next[pad] ?? 0 : given
        next[pad] = pts + max(duration, 1)
        let time = Double(pts) * timeBases[pad].double
        if first == nil { first = time }
        return (time, min(Monotonic.now, connectedAt + max(0, time - first!)))
    }

    /// A decoder that took over from pending pictures decodes their run again: those went out already.
    func alreadyPending(pad: Int, pts: Int64) -> Bool {
        guard pad == 0, let last = lastPending else { return false }
        if pts <= last { return true }
        lastPending = nil
        return false
    }

    /// The picture of `av` (a video packet) without its pixels, kept with the packets since the
    /// last keyframe; nil for a packet that is no picture. A reordered packet (B-frames: its
    /// picture could neither be sent on nor shown in packet order) ends the pending: the session
    /// decodes from the last keyframe on, every picture after the last pending one, and then
    /// `picturesOnRequest` is nil and the caller decodes this packet.
    func pendingPicture(_ av: UnsafeMutablePointer<AVPacket>) throws -> (frame: Frame, time: Double, sent: Double)? {
        guard let stream = streams[0], let onRequest = picturesOnRequest else { return nil }
        let packet = Packet(referencing: av, stream: stream)
        if av.pointee.pts != av.pointee.dts || av.pointee.pts == avg_nopts() {
            try decodeEveryPicture()
            return nil
        }
        sequences[0] += 1
        if let record = packet.newExtradata { configurations[0] = SourceConfiguration(bytes: record) }
        guard let configuration = configurations[0] else { return nil }
        if packet.isKeyframe || run == nil {
            run = PicturesOnRequest.Run(owner: onRequest, first: sequences[0], configuration: configuration)
        }
        guard let run else { return nil }
        run.packets.withLock { $0.append(packet) }
        let codec = PicturesOnRequest.codec(of: stream)
        let lengthSize = VideoSequenceSize.nalLengthSize(codec, config: configuration.bytes[...]) ?? 4
        guard PicturesOnRequest.isPicture(av, nalLengthSize: lengthSize, codec: codec) else { return nil }
        if codec == .h264, let declared = H264DisplayOrientation.of(av, nalLengthSize: lengthSize) { orientation = declared }
        if pictureSize?.configuration !== configuration {
            guard let size = VideoSequenceSize.of(codec, config: configuration.bytes[...]).first else { return nil }
            pictureSize = (configuration, size.width, size.height)
        }
        if packet.isKeyframe, let inBand = VideoSequenceSize.of(codec, frames: packet.bytes, nalLengthSize: lengthSize).first {
            pictureSize = (configuration, inBand.width, inBand.height)
        }
        guard let size = pictureSize else { return nil }
        let source = SourcePicture(packet: packet, codec: stream.codecName, configuration: configuration, session: session,
                                   sequence: sequences[0], decoding: run)
        let frame = Frame.pending(width: size.width, height: size.height, format: AV_PIX_FMT_YUV420P, timeBase: timeBases[0],
                                  orientation: orientation, source: source)
        frame.pts = av.pointee.pts
        frame.av.pointee.pkt_duration = av.pointee.duration
        lastPending = av.pointee.pts
        let (time, sent) = stamp(pts: av.pointee.pts, duration: av.pointee.duration, pad: 0)
        return (frame, time, sent)
    }

    /// Pending pictures end: a decoder takes the packets since the last keyframe (the pictures
    /// already out are not emitted again) and then every packet.
    private func decodeEveryPicture() throws {
        guard let stream = streams[0] else { return }
        picturesOnRequest = nil
        let described = try run.map { try stream.replacingExtradata($0.configuration.bytes) } ?? stream
        let decoder = try videoDecoder(described)
        decoders[0] = decoder
        for packet in run?.packets.withLock({ Array($0) }) ?? [] { try decoder.send(packet.av) }
        run = nil
    }

    /// Notes the packet about to be decoded, so its frame can carry it (`h264`/`aac` passthrough).
    /// Only a packet decoded in the order it is shown (pts = dts: no B-frames) can be sent on in
    /// its frame's place; the others are counted (their successors are not consecutive) but not kept.
    func keepSourcePacket(_ av: UnsafeMutablePointer<AVPacket>, pad: Int) {
        guard let stream = streams[pad] else { return }
        sequences[pad] += 1
        let packet = Packet(referencing: av, stream: stream)
        if let record = packet.newExtradata { configurations[pad] = SourceConfiguration(bytes: record) }
        guard let configuration = configurations[pad], av.pointee.pts == av.pointee.dts, av.pointee.pts != avg_nopts() else { return }
        // A packet that made no frame (damaged, skipped) is never asked for: the map holds a few at most.
        if waiting[pad].count > 64 { waiting[pad].removeAll() }
        waiting[pad][av.pointee.pts] = SourcePicture(packet: packet, codec: stream.codecName, configuration: configuration,
                                                     session: session, sequence: sequences[pad])
    }

    /// The packet a decoded frame (by its pts) was made from, if it may stand for it.
    func sourcePacket(pts: Int64, pad: Int) -> SourcePicture? {
        guard pts != avg_nopts() else { return nil }
        // Without reordering, frames come out in packet order: older entries made no frame.
        for key in waiting[pad].keys where key < pts { waiting[pad][key] = nil }
        return waiting[pad].removeValue(forKey: pts)
    }
}
