import AVGraph
import CFFmpeg
import Foundation

/// Options and format rule shared by the network sources (`rtmp`, `srt` without `in:`): what
/// arrives is only known once a publisher connects, so the declared formats are what `check`
/// propagates; pictures keep the size they arrive in (`sizeVaries`), audio is converted to the
/// declared rate and channels on the source's own thread.
enum NetworkSourceOptions {
    static let outputs = [
        PadSpec("video", [.rawVideo], doc: "decoded pictures (their own size; orientation from the stream's display matrix), pts in µs"),
        PadSpec("audio", [.rawAudio], doc: "decoded audio, at audio-rate/audio-channels"),
    ]
    static let listen = Setting.bool("listen", default: false,
        doc: "true: avgraph is the server (binds the url's host and port and waits for a publisher); false: pulls the stream from a server")
    static let idle = Setting<Double?>.duration("idle", 0.1...86400,
        doc: "end the run when no publisher has been connected for this long (also before the first one); unset: wait for ever")
    static let timeout = Setting.duration("timeout", 1...120, default: "5s",
        doc: "a publisher that sends nothing for this long counts as gone (then: wait for it again)")
    static let size = Setting.size("size", default: "1280x720",
        doc: "expected picture size (what check propagates; pictures keep the size they arrive in)")
    static let buffer = Setting.int("buffer", 1...120, default: 8, doc: "decoded pictures queued between the network reader and the pipeline")

    static func common() -> [OptionSpec] {
        [listen.spec, idle.spec, timeout.spec, size.spec, IngestOptions.rate.spec, IngestOptions.audioRate.spec,
         IngestOptions.audioChannels.spec, buffer.spec, IngestOptions.audioBuffer.spec]
    }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        let size = n[Self.size]
        guard size.width >= 2, size.height >= 2 else { throw NegotiationError("size must be at least 2x2", option: "size") }
        var video = StreamFormat.video(width: size.width, height: size.height, pixelFormat: "yuv420p", frameRate: n[IngestOptions.rate])
        video.timeBase = Rational(1, 1_000_000)
        video.sizeVaries = true
        let audio = StreamFormat.audio(sampleRate: n[IngestOptions.audioRate], channels: n[IngestOptions.audioChannels], sampleFormat: "flt")
        return [video, audio]
    }

    /// The URL as events and logs show it: no stream key, password or passphrase.
    static func redacted(_ url: String) -> String { Redaction.url(url) }
}

/// How one network source type opens its input.
struct NetworkInput {
    var url: String
    /// libavformat's demuxer to use (`mpegts` for SRT), or nil to probe.
    var format: String?
    var options: [String: String]
    var listen: Bool
    var timeout: Double
    /// avgraph's own server (a listening `rtmp` source): it accepts, authenticates and hands
    /// over publishers; nil: libavformat opens `url`.
    var listener: PublisherListener?
    /// Pictures larger than this are refused (`max-size`).
    var maxSize = PictureSize(width: 3840, height: 2160)
    /// The publisher's in-band privacy switches (RTMP `onPrivacy`), applied to its pictures.
    var privacy = PrivacyTimeline()
}

/// The node side of a network source: starts the reader, maps its sessions onto the run's
/// clock through the ingest emitter (the same reconnect behaviour as the `socket` source),
/// reports publishers and ends the run after `idle` without one.
final class NetworkSourceCore {
    let hub: IngestHub
    let emitter: IngestEmitter
    let reader: NetworkReader
    private let idle: Double?
    private let duration: Double?
    private var announced = false
    private var idleSince = 0.0

    init(_ setup: NodeSetup, input: NetworkInput) {
        // A decoded picture refused when the queue stays full breaks no reference chain: drop the newest.
        hub = IngestHub(videoCapacity: setup[NetworkSourceOptions.buffer], audioCapacity: setup[IngestOptions.audioBuffer], policy: .newest,
                        privacy: input.privacy)
        emitter = IngestEmitter(hub: hub, outputs: setup.outputs)
        idle = setup[NetworkSourceOptions.idle]
        duration = setup.duration
        reader = NetworkReader(input, hub: hub)
        reader.start()
    }

    func produce(_ out: Outlet) throws -> Bool {
        if !announced {
            announced = true
            idleSince = out.clock
            if reader.input.listen { out.event(.listening(.init(path: reader.shownURL))) }
        }
        report(out)
        if let duration, out.clock >= duration { return false }
        switch hub.queue.next(timeout: 0.05) {
        case .item(let item): try emitter.emit(item, out)
        case .timeout:
            emitter.reportDrops(out)
            if !reader.isConnected { try emitter.producerLeft(out) }
        case .ended: return false
        }
        if reader.isConnected { idleSince = out.clock }
        if let idle, out.clock - idleSince >= idle {
            out.event(.idle(.init(seconds: idle, url: reader.shownURL)))
            return false
        }
        if let failure = reader.failure { throw failure }
        return !out.reachedEnd
    }

    private func report(_ out: Outlet) {
        for note in reader.takeNotes() {
            switch note {
            case .warning(let message): out.warning(message)
            case .event(let kind): out.event(kind)
            }
        }
    }

    /// Stopped (SIGTERM when the publisher left nginx, Ctrl-C): what was already decoded still
    /// goes into the recording.
    func finish(_ out: Outlet) throws {
        reader.stop()
        report(out)
        hub.finish()
        while case .item(let item) = hub.queue.next(timeout: 0) { try emitter.emit(item, out) }
        emitter.reportDrops(out)
    }

    func abort() {
        reader.stop()
        hub.finish()
    }
}

/// The reader thread of a network source: waits for a publisher (or connects to the server),
/// demuxes and decodes its stream, hands the frames to the hub; when the publisher goes, it
/// waits for the next one on the same URL. Every blocking call is cut short by `stop()`.
final class NetworkReader: @unchecked Sendable {
    enum Note { case warning(String), event(Event.Kind) }

    let input: NetworkInput
    let shownURL: String
    private let hub: IngestHub
    let cancel = CancelFlag()
    private let lock = NSLock()
    private var notes: [Note] = []
    private var connected = false
    private var failed: MediaError?
    private var session = 0
    private var packets = 0
    private let backlog = PacketBacklog(limit: 64 << 20)
    private let done = DispatchSemaphore(value: 0)
    private var started = false

    init(_ input: NetworkInput, hub: IngestHub) {
        self.input = input
        self.hub = hub
        shownURL = NetworkSourceOptions.redacted(input.url)
    }

    func start() {
        started = true
        input.listener?.start()
        let t = Thread { [self] in
            loop()
            done.signal()
        }
        t.name = "network-reader"
        t.start()
    }

    func stop() {
        guard !cancel.isCancelled else { return }
        cancel.cancel()
        input.listener?.stop()
        if started { done.wait() }
    }

    var isConnected: Bool { lock.lock(); defer { lock.unlock() }; return connected }
    var failure: MediaError? { lock.lock(); defer { lock.unlock() }; return failed }

    func takeNotes() -> [Note] {
        let refused = input.listener?.takeNotes() ?? []
        lock.lock()
        defer { lock.unlock() }
        let n = notes + refused.map { Note.warning($0) }
        notes.removeAll()
        return n
    }

    func note(_ n: Note) {
        lock.lock()
        notes.append(n)
        lock.unlock()
    }

    private func loop() {
        let decoded = DispatchSemaphore(value: 0)
        let worker = Thread { [self] in
            decode()
            decoded.signal()
        }
        worker.name = "network-decode"
        worker.start()
        defer {
            backlog.end()
            decoded.wait()
        }
        var delay = 0.5
        var lastWarning = ""
        while !cancel.isCancelled {
            var options = input.options
            options["rw_timeout"] = String(Int64(input.timeout * 1e6))
            let demuxer: Demuxer
            let peer: String
            let stream: PublisherStream?
            do {
                guard let opened = try open(options) else { break }
                (demuxer, peer, stream) = opened
            } catch {
                if cancel.isCancelled { break }
                // A publisher that hangs up during the handshake, or a server not there yet: try again.
                let message = "\(error)"
                if message != lastWarning { note(.warning(message)) }
                lastWarning = message
                pause(input.listen ? 0.1 : delay)
                delay = min(delay * 2, 5)
                continue
            }
            delay = 0.5
            lastWarning = ""
            session += 1
            lock.lock()
            connected = true
            lock.unlock()
            note(.event(.publisher(.init(state: .connected, session: session, peer: peer, url: shownURL))))
            let started = Monotonic.now
            var reason = "ended"
            packets = 0
            do { try read(demuxer, connectedAt: started) } catch {
                reason = cancel.isCancelled ? "stopped" : "\(error)"
            }
            stream?.abandon()
            lock.lock()
            connected = false
            lock.unlock()
            note(.event(.publisher(.init(state: .disconnected, session: session, peer: peer, url: shownURL, reason: reason,
                                         seconds: ((Monotonic.now - started) * 1000).rounded() / 1000, packets: packets))))
        }
    }

    private func pause(_ seconds: Double) {
        let end = Monotonic.now + seconds
        while !cancel.isCancelled && Monotonic.now < end { usleep(20_000) }
    }

    /// One publisher's session, until it ends or breaks. This thread only reads the network and
    /// queues packets; the decoding thread does the rest. So the reader never waits on the
    /// pipeline (SRT in live mode throws away what is not read in time; compressed packets are
    /// small enough to hold seconds of them), and it listens again as soon as a publisher goes.
    private func read(_ demuxer: Demuxer, connectedAt: Double) throws {
        let videoIndex = demuxer.bestStream(AVMEDIA_TYPE_VIDEO)
        let audioIndex = demuxer.bestStream(AVMEDIA_TYPE_AUDIO)
        func decoder(_ i: Int?) throws -> Decoder? {
            guard let i else { return nil }
            let s = demuxer.stream(i)
            return try Decoder(parameters: s.pointee.codecpar, timeBase: Rational(s.pointee.time_base),
                               threads: NetworkReader.decoderThreads, maxPixels: input.maxSize.width * input.maxSize.height)
        }
        let decoding = SessionDecoding(
            session: session, connectedAt: connectedAt, decoders: [try decoder(videoIndex), try decoder(audioIndex)],
            timeBases: [videoIndex, audioIndex].map { $0.map { Rational(demuxer.stream($0).pointee.time_base) } ?? Rational(1, 1) },
            orientation: videoIndex.map { FileProbe.orientation(of: demuxer.stream($0)) } ?? .up)
        backlog.begin(decoding)
        let packet = av_packet_alloc()!
        defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
        while !cancel.isCancelled {
            guard try demuxer.read(into: packet) else { break }
            let i = Int(packet.pointee.stream_index)
            guard let pad = i == videoIndex ? 0 : i == audioIndex ? 1 : nil else { continue }
            packets += 1
            backlog.push(packet, pad: pad)
        }
    }

    /// The decoding thread: packets from the backlog, frames to the hub, each session's decoders
    /// drained when the next session begins or the reader stops.
    private func decode() {
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
        while let item = backlog.next(cancel) {
            switch item {
            case .begin(let next):
                drain()
                current = next
            case .packet(let packet, let pad):
                defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
                guard let c = current, c.healthy else { continue }
                do {
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

extension IngestHub {
    /// Queues a decoded frame from a network reader (pad 0 video, 1 audio). A full queue makes
    /// the reader wait a little (TCP or SRT hold the stream meanwhile) before the drop policy
    /// applies: a short stall of the pipeline costs nothing, only a lasting one drops.
    func pushDecoded(_ frame: Frame, pad: Int, time: Double, sent: Double, session: Int, cancel: CancelFlag) {
        let seconds = IngestQueue.seconds(frame)
        let deadline = Monotonic.now + 1
        while !(pad == 0 ? queue.hasRoomForVideo() : queue.hasRoomForAudio(seconds: seconds)),
              Monotonic.now < deadline, !cancel.isCancelled {
            usleep(2000)
        }
        if pad != 0 && !queue.hasRoomForAudio(seconds: seconds) { queue.noteDropped(pad: pad); return }
        if pad == 0 { frame.privacy = privacy.mark(at: time) }
        _ = queue.push(IngestQueue.Item(pad: pad, frame: frame, sourceTime: time, arrival: sent, session: session))
    }
}

/// One publisher session's decoders and timing, used by the decoding thread alone.
final class SessionDecoding: @unchecked Sendable {
    let session: Int
    let connectedAt: Double
    let decoders: [Decoder?]
    let timeBases: [Rational]
    var orientation: Orientation
    var first: Double?
    var next: [Int64?] = [nil, nil]
    var healthy = true

    init(session: Int, connectedAt: Double, decoders: [Decoder?], timeBases: [Rational], orientation: Orientation) {
        self.session = session
        self.connectedAt = connectedAt
        self.decoders = decoders
        self.timeBases = timeBases
        self.orientation = orientation
    }
}
