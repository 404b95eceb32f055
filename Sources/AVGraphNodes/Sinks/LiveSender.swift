import AVGraph
import AVGraphTransport
import Foundation
import Synchronization

/// The part of a live network sink (`rtmp`, `srt`) that does not depend on the protocol: a
/// queue between the node's thread and a sender thread of its own, the drop policy that keeps
/// that queue inside `buffer`, and reconnecting with exponential backoff.
///
/// The node's thread only enqueues, so a slow or broken network never pushes back on the
/// encoder, and the other sinks fed by the same encoder (a recording) run on undisturbed.
/// The sender thread alone blocks on the network.
final class LiveSender: Sendable {
    struct Settings: Sendable {
        var url: String
        /// The url as printed: the stream key, passphrase and stream id masked.
        var shownURL: String { Redaction.url(url) }
        /// libavformat's muxer: `flv` for RTMP, `mpegts` for SRT.
        var format: String
        var muxerOptions: [String: String] = [:]
        /// Options of the network protocol itself (libsrt's `linger`).
        var protocolOptions: [String: String] = [:]
        var attempts: Int
        var firstDelay: Double
        var longestDelay: Double
        /// Seconds of video kept while the network does not take it.
        var buffer: Double
        /// Seconds without progress after which a connection counts as gone.
        var timeout: Double
        var realtime: Bool
        /// What opens each session: libavformat (SRT) or avgraph's RTMP client.
        var session: LiveSessionKind = .muxer
    }

    struct Item: Sendable {
        let input: Int
        let packet: Packet
        let isVideo: Bool
    }

    private let settings: Settings
    private let isVideoInput: [Bool]
    private let cancel = CancelFlag()

    /// Shared by the node's thread and the sender thread; each sleeps on it for what the other does.
    struct Shared {
        var queue: [Item] = []
        var queuedBytes = 0
        var newest = Int64.min
        var streams: [EncodedStream?]
        var ended: [Bool]
        var ending = false
        var connected = false
        var failure: MediaError?
        /// After video was dropped, what follows must wait for a keyframe (no broken reference chain).
        var videoWaitsForKeyframe = false
        var droppedVideo = 0
        var droppedAudio = 0
        /// The live session's socket (nil between sessions), and bytes handed to it, all and audio.
        var socket: UplinkSocket?
        /// When the session on `socket` began (`UplinkFeedback.now`).
        var sessionStart = 0.0
        var sentBytes = 0
        var sentAudioBytes = 0
        var reconnects = 0
        /// The sender thread: started (by the node's thread) and exited.
        var started = false
        var exited = false
    }
    private let shared: ConditionLock<Shared>

    init(_ settings: Settings, inputIsVideo: [Bool]) {
        self.settings = settings
        isVideoInput = inputIsVideo
        shared = ConditionLock(Shared(streams: Array(repeating: nil, count: inputIsVideo.count),
                                      ended: Array(repeating: false, count: inputIsVideo.count)))
    }

    // MARK: the node's side (never blocks on the network)

    /// Queues `packet`, dropping by policy when the queue holds more than `buffer`. Offline runs
    /// wait instead while connected: there is no clock to keep up with, so nothing need be lost.
    func push(_ packet: Packet, input: Int, overMemoryLimit: Bool, out: Outlet) throws {
        startIfNeeded(out)
        let (buffer, realtime, isVideo, cancel) = (settings.buffer, settings.realtime, isVideoInput[input], cancel)
        // Every path changes what the sender waits for (a stream described, a packet queued).
        _ = try shared.wait(wakingOthers: { _ in true }) { s -> Bool? in
            if let failure = s.failure { throw failure }
            // Offline: woken by the sender taking a packet, losing the connection, failing or being cancelled.
            if !realtime && s.connected && s.span(video: true) > s.limit(buffer: buffer) && !cancel.isCancelled { return nil }
            if s.streams[input] == nil { s.streams[input] = packet.stream }
            if isVideo && s.videoWaitsForKeyframe {
                if !packet.isKeyframe { s.droppedVideo += 1; return true }
                s.videoWaitsForKeyframe = false
            }
            s.queue.append(Item(input: input, packet: packet, isVideo: isVideo))
            s.queuedBytes += packet.byteCount
            s.newest = max(s.newest, packet.time)
            s.enforceLimits(buffer: buffer, overMemoryLimit: overMemoryLimit)
            return true
        }
    }

    func inputEnded(_ input: Int) {
        shared.withLockWakingAll { $0.ended[input] = true }
    }

    /// Sessions opened again after a failure, and seconds of media queued (for `/metrics`).
    var health: (reconnects: Int, bufferedSeconds: Double) {
        shared.withLock { s in (s.reconnects, Double(max(s.span(video: true), s.span(video: false))) / 1e6) }
    }

    /// Bytes handed to the socket over the last second or so, and the session's least round
    /// trip (node thread only: a Mutex nobody else takes).
    private struct Measured {
        var sendHistory: [(at: Double, bytes: Int, audio: Int)] = []
        var measuredSession = 0.0
        var leastRoundTrip = Double.infinity
    }
    private let measured = Mutex(Measured())
    /// A new session first sends what queued up while it connected: that backlog says nothing of the link.
    static let settling = 2.0

    /// How the uplink copes, for an adaptive encoder: media waiting (the queue's span, what the
    /// socket holds unsent at the rate it drains, and the round trip over the session's least:
    /// what waits in the link's own queue) and, while media waits, the video bit/s
    /// the link carries (what left in the last second, or the transport's delivery rate, less
    /// the audio). Nil while not connected: a destination that is away measures no link.
    func measureUplink(destination: String, now: Double) -> UplinkFeedback.Reading? {
        // The socket is read under the lock: the sender forgets it there before closing it.
        let (socket, figures, queued, sent, audio, session) = shared.withLock { s in
            (s.socket, s.socket.flatMap(UplinkProbe.read), Double(max(s.span(video: true), s.span(video: false))) / 1e6,
             s.sentBytes, s.sentAudioBytes, s.sessionStart)
        }
        let (history, leastRoundTrip) = measured.withLock { m in
            if session != m.measuredSession {
                m.measuredSession = session
                m.sendHistory.removeAll()
                m.leastRoundTrip = .infinity
            }
            if let rtt = figures?.roundTrip, rtt > 0 { m.leastRoundTrip = min(m.leastRoundTrip, rtt) }
            m.sendHistory.append((now, sent, audio))
            while m.sendHistory.count > 2, now - m.sendHistory[1].at >= 1 { m.sendHistory.removeFirst() }
            return (m.sendHistory, m.leastRoundTrip)
        }
        guard socket != nil, now - session >= Self.settling, let first = history.first, now - first.at >= 0.2 else { return nil }
        let seconds = now - first.at
        let sendRate = Double(sent - first.bytes) * 8 / seconds
        let audioRate = Double(audio - first.audio) * 8 / seconds
        let unsent = Double(figures?.unsentBytes ?? 0) * 8
        let inLink = figures?.roundTrip.map { max(0, $0 - leastRoundTrip) } ?? 0
        let backlog = queued + (sendRate > 0 ? unsent / sendRate : 0) + inLink
        var carries: Int?
        if backlog > AdaptiveBitrate.clear {
            // Media waits, so the socket was kept full: what left is what the link carries.
            let link = sendRate > 0 ? sendRate : Double(figures?.deliveredBits ?? 0)
            carries = link > 0 ? max(0, Int(link - audioRate)) : nil
        }
        return .init(destination: destination, backlog: backlog, carries: carries, roundTrip: figures?.roundTrip, at: now)
    }

    /// Bytes held (for the pipeline's memory budget) and drops so far.
    var state: (bytes: Int, video: Int, audio: Int, failure: MediaError?) {
        shared.withLock { ($0.queuedBytes, $0.droppedVideo, $0.droppedAudio, $0.failure) }
    }

    /// Sends what is queued (while connected, within `grace` seconds) and hangs up cleanly.
    func finish(grace: Double) {
        let started = shared.withLockWakingAll { s in
            s.ending = true
            return s.started
        }
        guard started else { return }
        if shared.wait(until: Monotonic.now + grace, { $0.exited ? true : nil }) == nil {
            cancelAndWake()
            waitForExit()
        }
        dropAll()
    }

    /// The sender thread has exited (at once when it never started).
    private func waitForExit() { _ = shared.wait { $0.exited || !$0.started ? true : nil } }

    /// Cancels every blocking call, and wakes every wait on `shared` to see it.
    private func cancelAndWake() {
        cancel.cancel()
        shared.wakeAll()
    }

    /// Hangs up at once (the run failed elsewhere).
    func abort() {
        cancel.cancel()
        shared.withLockWakingAll { $0.ending = true }
        waitForExit()
        dropAll()
    }

    private func startIfNeeded(_ out: Outlet) {
        let start = shared.withLock { s in
            defer { s.started = true }
            return !s.started
        }
        guard start else { return }
        let thread = Thread { [self] in
            self.sendLoop(out)
            self.shared.withLockWakingAll { $0.exited = true }
        }
        thread.name = out.nodeName + "-send"
        thread.start()
    }

    static let adaptiveBuffer = 0.7

    /// The kernel takes no more than this much unsent into a TCP socket: what waits beyond it
    /// waits in `queue`, where the drop policy can reach it and the backlog is measured exactly.
    /// Without it Linux grows the send buffer to megabytes (seconds of a narrow uplink) that can
    /// only be sent late. It bounds what is unsent, not what is in flight, so a wide link's
    /// throughput is not limited.
    static let unsentInKernel: Int32 = 32 * 1024

    private static func keepBacklogQueued(_ fd: Int32) {
        var bytes = unsentInKernel
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NOTSENT_LOWAT, &bytes, socklen_t(MemoryLayout<Int32>.size))
    }

    private func dropAll() {
        shared.withLock { s in
            for item in s.queue { if item.isVideo { s.droppedVideo += 1 } else { s.droppedAudio += 1 } }
            s.queue.removeAll()
            s.queuedBytes = 0
        }
    }

    // MARK: the sender thread

    private struct Cancelled: Error {}

    private func sendLoop(_ out: Outlet) {
        var attempt = 0
        var lostAt: Date?
        while !cancel.isCancelled {
            guard waitForStreams() else { return }
            do {
                if attempt == 0 && lostAt == nil { out.report(state: "connecting") }
                let session = try connect()
                let uplink = session.uplinkSocket
                if case .tcp(let fd)? = uplink { Self.keepBacklogQueued(fd) }
                shared.withLockWakingAll { s in
                    s.connected = true
                    s.socket = uplink
                    s.sessionStart = UplinkFeedback.now
                }
                out.report(state: "sending")
                if let lostAt {
                    shared.withLock { $0.reconnects += 1 }
                    out.event(ReconnectedEvent(url: settings.shownURL, attempts: attempt,
                                               after: (Date().timeIntervalSince(lostAt) * 1000).rounded() / 1000))
                }
                attempt = 0
                lostAt = nil
                do {
                    try send(session)
                    forgetSocket()
                    try session.finish()
                    out.report(state: "ended")
                    return
                } catch is Cancelled {
                    forgetSocket()
                    session.close()
                    return
                } catch {
                    forgetSocket()
                    session.close()
                    let stop = shared.withLockWakingAll { s in
                        s.connected = false
                        return s.ending
                    }
                    out.event(DisconnectedEvent(url: settings.shownURL, reason: Redaction.text("\(error)")))
                    lostAt = Date()
                    if stop {
                        out.warning("the stream to \(settings.shownURL) broke while ending: what was still queued is not sent")
                        return
                    }
                }
            } catch {
                if cancel.isCancelled { return }
                if let refused = error as? LiveSessionRefused {
                    // Another attempt would be refused the same way.
                    shared.withLockWakingAll { $0.failure = MediaError(refused.description) }
                    out.report(state: "failed")
                    return
                }
                lostAt = lostAt ?? Date()
                let stop = shared.withLock { $0.ending }
                if stop {
                    out.warning("the run ended while \(settings.shownURL) was unreachable (\(Redaction.text("\(error)"))): what was queued is not sent")
                    return
                }
                if attempt >= settings.attempts {
                    let tries = attempt + 1
                    let failure = MediaError("cannot reach \(settings.shownURL): \(Redaction.text("\(error)")) (\(tries) attempt\(tries == 1 ? "" : "s"))")
                    shared.withLockWakingAll { $0.failure = failure }
                    out.report(state: "failed")
                    return
                }
            }
            // Backoff before the next attempt: the first delay, doubling up to the longest.
            attempt += 1
            let delay = min(settings.longestDelay, settings.firstDelay * pow(2, Double(attempt - 1)))
            out.event(ReconnectingEvent(url: settings.shownURL, attempt: attempt, of: settings.attempts, delay: delay))
            out.report(state: "reconnecting")
            let cancel = cancel
            _ = shared.wait(until: Monotonic.now + delay) { s in s.ending || cancel.isCancelled ? true : nil }
        }
    }

    /// The socket goes before the muxer closes it: the node's thread reads it (`measureUplink`)
    /// under the same lock, so it never reads a closed, maybe reused, descriptor.
    private func forgetSocket() {
        shared.withLock { $0.socket = nil }
    }

    /// Waits until every input has described its stream (its first packet) or ended.
    /// False when the run ends first with nothing to send.
    private func waitForStreams() -> Bool {
        let cancel = cancel
        // Woken by push, inputEnded, finish, abort.
        return shared.wait { s -> Bool? in
            if cancel.isCancelled { return false }
            let known = s.streams.indices.allSatisfy { s.streams[$0] != nil || s.ended[$0] }
            if known && s.streams.contains(where: { $0 != nil }) { return !(s.ending && s.queue.isEmpty) }
            if s.ending || s.ended.allSatisfy({ $0 }) { return false }
            return nil
        }!
    }

    /// A new session: connect, one stream per input that delivered media, the header.
    private func connect() throws -> any LiveSession {
        let described = shared.withLock { $0.streams }
        switch settings.session {
        case .muxer:
            return try MuxerLiveSession(url: settings.url, format: settings.format, timeout: settings.timeout, cancel: cancel,
                                        protocolOptions: settings.protocolOptions, muxerOptions: settings.muxerOptions, streams: described)
        case .rtmp(let trusted):
            return try RtmpLiveSession(url: settings.url, streams: described, timeout: settings.timeout,
                                       trustedCertificates: trusted, cancel: cancel)
        }
    }

    /// Sends queued packets in order until the run ends and the queue is empty.
    private func send(_ session: any LiveSession) throws {
        var startedOnKeyframe = false
        let (cancel, isVideoInput) = (cancel, isVideoInput)
        while true {
            // Woken by push, inputEnded, finish, abort; taking a packet wakes an offline push waiting for room.
            let next = try shared.wait(wakingOthers: { _ in true }) { s -> Item?? in
                if cancel.isCancelled { throw Cancelled() }
                if !startedOnKeyframe { startedOnKeyframe = s.trimToKeyframe(isVideoInput: isVideoInput) }
                if startedOnKeyframe && !s.queue.isEmpty {
                    let item = s.queue.removeFirst()
                    s.queuedBytes -= item.packet.byteCount
                    return .some(item)
                }
                if s.ending && (s.queue.isEmpty || !startedOnKeyframe && s.ended.allSatisfy({ $0 })) { return .some(nil) }
                return nil
            }!
            guard let item = next else { return }
            let bytes = item.packet.byteCount
            try session.write(item.packet, input: item.input)
            shared.withLock { s in
                s.sentBytes += bytes
                if !item.isVideo { s.sentAudioBytes += bytes }
            }
        }
    }
}
