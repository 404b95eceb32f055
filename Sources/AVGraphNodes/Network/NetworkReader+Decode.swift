import AVGraph
import CFFmpeg
import Foundation

extension NetworkReader {
    /// The decoding thread: packets from the backlog, frames to the hub, each session's decoders
    /// drained when its stream ends (or the next session begins, or the reader stops).
    func decode() {
        var current: SessionDecoding?
        func drain() {
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
            switch item {
            case .begin(let next):
                drain()
                current = next
            case .end(let session):
                if current?.session == session {
                    drain()
                    current = nil
                }
                sessionDelivered(session)
            case .packet(let packet, let pad):
                defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
                guard let c = current, c.healthy else { continue }
                do {
                    c.keepSourcePacket(packet, pad: pad)
                    try c.decoders[pad]?.send(packet)
                    try push(c, pad)
                } catch {
                    c.healthy = false
                    note(.warning("decoding the stream from \(shownURL) failed (session \(c.session)): \(error)"))
                }
            }
        }
        if !cancel.isCancelled { drain() }
        backlog.discard()
    }

    /// Frames out of one decoder to the hub, stamped with the media time since the session's
    /// first frame laid on the wall clock from the moment the publisher connected: a live
    /// publisher sends as it goes, so that is when each was sent, and a reconnect's gap on the
    /// run's clock is the gap the publisher left.
    private func push(_ c: SessionDecoding, _ pad: Int) throws {
        guard let decoder = c.decoders[pad] else { return }
        let timeBase = c.timeBases[pad]
        while let av = try decoder.receive() {
            // A display orientation SEI holds for the pictures after it until the next one says otherwise.
            if pad == 0 { c.orientation = Self.orientation(av, c.orientation) }
            let frame = Frame(owning: av, timeBase: timeBase, orientation: pad == 0 ? c.orientation : .up)
            frame.source = c.sourcePacket(pts: av.pointee.pts, pad: pad)
            var pts = av.pointee.best_effort_timestamp
            if pts == avg_nopts() { pts = av.pointee.pts }
            // MPEG-TS stamps only the first of the audio frames in a PES packet: the rest follow on.
            if pts == avg_nopts() { pts = c.next[pad] ?? 0 }
            let duration = av.pointee.nb_samples > 0
                ? av_rescale_q(Int64(av.pointee.nb_samples), AVRational(num: 1, den: max(av.pointee.sample_rate, 1)), timeBase.av)
                : av.pointee.pkt_duration
            c.next[pad] = pts + max(duration, 1)
            let time = Double(pts) * timeBase.double
            if c.first == nil { c.first = time }
            let sent = min(Monotonic.now, c.connectedAt + max(0, time - c.first!))
            av.pointee.pict_type = AV_PICTURE_TYPE_NONE
            hub.pushDecoded(frame, pad: pad, time: time, sent: sent, session: c.session, cancel: cancel)
        }
    }

    /// A picture's own display matrix (H.264 display orientation SEI) wins over what held before.
    private static func orientation(_ av: UnsafeMutablePointer<AVFrame>, _ stream: Orientation) -> Orientation {
        guard let sd = av_frame_get_side_data(av, AV_FRAME_DATA_DISPLAYMATRIX), sd.pointee.size >= 36 else { return stream }
        return FileProbe.orientation(matrix: UnsafeRawPointer(sd.pointee.data))
    }
}

/// One publisher session's decoders and timing, used by the decoding thread alone.
final class SessionDecoding {
    let session: Int
    let connectedAt: Double
    let decoders: [Decoder?]
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

    init(session: Int, connectedAt: Double, decoders: [Decoder?], timeBases: [Rational], orientation: Orientation,
         video: EncodedStream? = nil, audio: EncodedStream? = nil) {
        self.session = session
        self.connectedAt = connectedAt
        self.decoders = decoders
        self.timeBases = timeBases
        self.orientation = orientation
        streams = [video, audio]
        configurations = streams.map { $0.map { SourceConfiguration(bytes: $0.extradata) } }
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
