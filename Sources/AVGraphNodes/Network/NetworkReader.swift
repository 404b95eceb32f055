import AVGraph
import AVGraphTransport
import CFFmpeg
import Foundation
import Synchronization

/// The reader thread of a network source: waits for a publisher (or connects to the server),
/// demuxes and decodes its stream, hands the frames to the hub; when the publisher goes, it
/// waits for the next one on the same URL. Every blocking call is cut short by `stop()`.
final class NetworkReader: Sendable {
    enum Note: Sendable { case warning(String), event(any NodeEvent) }

    let input: NetworkInput
    let shownURL: String
    let hub: IngestHub
    let cancel = CancelFlag()
    private struct Shared {
        var notes: [Note] = []
        /// The publisher session whose media is still coming: from its connection until the decoder
        /// has handed over its last picture (not when the network stream ends: packets queued for
        /// the decoder are still its media).
        var liveSession: Int?
        var failed: MediaError?
    }
    private let shared = Mutex(Shared())
    /// The reader thread's alone (a Mutex nobody else takes): the session number, its packets.
    private let reading = Mutex((session: 0, packets: 0))
    private var session: Int { reading.withLock { $0.session } }
    let backlog: PacketBacklog
    /// The session whose packets are being decoded: the decoding thread's, or the reader's for
    /// a packet it hands on itself (`handOnPending`) while the decoding thread has nothing to do.
    let currentSession = Mutex<SessionDecoding?>(nil)
    /// Whether the reader thread started, and whether it is done.
    private let thread = ConditionLock((started: false, done: false))

    /// `backlog`: bytes of compressed packets held for the decoder (the source's `backlog`).
    init(_ input: NetworkInput, hub: IngestHub, backlog: Int) {
        self.input = input
        self.hub = hub
        self.backlog = PacketBacklog(limit: backlog)
        shownURL = NetworkSourceOptions.redacted(input.url)
    }

    func start() {
        thread.withLock { $0.started = true }
        // A refused peer is reported when it is refused, not at the next media or idle deadline.
        input.listener?.whenNoted { [hub] in hub.queue.wake() }
        input.listener?.start()
        let t = Thread { [self] in
            loop()
            thread.withLockWakingAll { $0.done = true }
        }
        t.name = "network-reader"
        t.start()
    }

    func stop() {
        guard !cancel.isCancelled else { return }
        cancel.cancel()
        // Wakes the decoder waiting for packets and a push waiting for room in the hub's queue.
        backlog.stop()
        hub.queue.wake()
        input.listener?.stop()
        _ = thread.wait { $0.started && !$0.done ? nil : true }
    }

    /// A publisher is there, or what it sent is not all out yet. Once false, everything it sent
    /// is in the hub's queue (the source's `producerLeft` relies on it).
    var isConnected: Bool { shared.withLock { $0.liveSession != nil } }

    /// The decoder handed over session `s`'s last picture: it is gone unless another took its place.
    func sessionDelivered(_ s: Int) {
        shared.withLock { if $0.liveSession == s { $0.liveSession = nil } }
        hub.queue.wake()
    }
    var failure: MediaError? { shared.withLock { $0.failed } }

    func takeNotes() -> [Note] {
        let refused = input.listener?.takeNotes() ?? []
        let links = (input.listener as? SrtlaListener)?.takeReports().map { r in
            Note.event(SrtlaLinksEvent(group: r.group, change: r.change,
                                       links: r.links.map { .init(address: $0.address, packets: $0.packets, share: $0.share, lastHeard: $0.lastHeard) }))
        } ?? []
        return shared.withLock { s in
            defer { s.notes.removeAll() }
            return s.notes + refused.map { Note.warning($0) } + links
        }
    }

    func note(_ n: Note) {
        shared.withLock { $0.notes.append(n) }
        hub.queue.wake()
    }

    private func loop() {
        let decoded = ConditionLock(false)
        let worker = Thread { [self] in
            decode()
            decoded.withLockWakingAll { $0 = true }
        }
        worker.name = "network-decode"
        worker.start()
        defer {
            backlog.end()
            _ = decoded.wait { $0 ? true : nil }
        }
        var delay = 0.5
        var lastWarning = ""
        while !cancel.isCancelled {
            var options = input.options
            options["rw_timeout"] = String(Int64(input.timeout * 1e6))
            let demuxer: PacketSource
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
                cancel.wait(seconds: input.listen ? 0.1 : delay)
                delay = min(delay * 2, 5)
                continue
            }
            delay = 0.5
            lastWarning = ""
            let session = reading.withLock { r in
                r.session += 1
                r.packets = 0
                return r.session
            }
            shared.withLock { $0.liveSession = session }
            note(.event(PublisherEvent(state: .connected, session: session, peer: peer, url: shownURL)))
            let started = demuxer.startedAt.map { min($0, Monotonic.now) } ?? Monotonic.now
            var reason = "ended"
            do { try read(demuxer, connectedAt: started) } catch {
                reason = cancel.isCancelled ? "stopped" : "\(error)"
            }
            stream?.abandon()
            backlog.endSession(session)
            note(.event(PublisherEvent(state: .disconnected, session: session, peer: peer, url: shownURL, reason: reason,
                                       seconds: ((Monotonic.now - started) * 1000).rounded() / 1000, packets: reading.withLock { $0.packets })))
        }
    }

    /// One publisher's session, until it ends or breaks. This thread only reads the network and
    /// queues packets (or hands on a pending frame when that costs no wait, `handOnPending`); the
    /// decoding thread does the rest. So the reader never waits on the pipeline (SRT in live mode
    /// throws away what is not read in time; compressed packets are small enough to hold seconds
    /// of them), and it listens again as soon as a publisher goes.
    private func read(_ demuxer: PacketSource, connectedAt: Double) throws {
        let videoIndex = demuxer.bestStream(AVMEDIA_TYPE_VIDEO)
        let audioIndex = demuxer.bestStream(AVMEDIA_TYPE_AUDIO)
        func decoder(_ i: Int?) throws -> Decoder? {
            guard let i else { return nil }
            return try Decoder(parameters: demuxer.parameters(i), timeBase: demuxer.timeBase(i),
                               threads: NetworkReader.decoderThreads, maxPixels: input.maxSize.width * input.maxSize.height)
        }
        let video = videoIndex.map { EncodedStream(copying: demuxer.parameters($0), timeBase: demuxer.timeBase($0), kind: .encodedVideo) }
        let maxPixels = input.maxSize.width * input.maxSize.height
        let onRequest = video.flatMap { input.pixelsOnRequest && PicturesOnRequest.takes($0) ? PicturesOnRequest(stream: $0, maxPixels: maxPixels) : nil }
        let audio = audioIndex.map { EncodedStream(copying: demuxer.parameters($0), timeBase: demuxer.timeBase($0), kind: .encodedAudio) }
        let decoding = SessionDecoding(
            session: session, connectedAt: connectedAt, decoders: [onRequest == nil ? try decoder(videoIndex) : nil, try decoder(audioIndex)],
            timeBases: [videoIndex, audioIndex].map { $0.map { demuxer.timeBase($0) } ?? Rational(1, 1) },
            orientation: videoIndex.map { demuxer.orientation($0) } ?? .up,
            video: video,
            audio: audio,
            picturesOnRequest: onRequest,
            samplesOnRequest: audio.flatMap { input.samplesOnRequest && $0.codecName == "aac" ? SamplesOnRequest(stream: $0, session: session) : nil },
            videoDecoder: { try Decoder(parameters: $0.parameters, timeBase: $0.timeBase, threads: NetworkReader.decoderThreads, maxPixels: maxPixels) })
        backlog.begin(decoding)
        let packet = av_packet_alloc()!
        defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
        while !cancel.isCancelled {
            guard try demuxer.read(into: packet) else { break }
            let i = Int(packet.pointee.stream_index)
            guard let pad = i == videoIndex ? 0 : i == audioIndex ? 1 : nil else { continue }
            reading.withLock { $0.packets += 1 }
            if handOnPending(packet, pad: pad) { continue }
            if case .dropped(let first) = backlog.push(packet, pad: pad) {
                hub.queue.noteDropped(pad: pad)
                if first {
                    note(.warning("the pipeline is \(HeldMemory.megabytes(backlog.limit)) of packets behind the publisher at \(shownURL): "
                        + "they are dropped (video up to its next keyframe) until it catches up"))
                }
            }
        }
    }

}
