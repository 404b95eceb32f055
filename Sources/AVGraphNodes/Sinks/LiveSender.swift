import AVGraph
import Foundation

/// The part of a live network sink (`rtmp`, `srt`) that does not depend on the protocol: a
/// queue between the node's thread and a sender thread of its own, the drop policy that keeps
/// that queue inside `buffer`, and reconnecting with exponential backoff.
///
/// The node's thread only enqueues, so a slow or broken network never pushes back on the
/// encoder, and the other sinks fed by the same encoder (a recording) run on undisturbed.
/// The sender thread alone blocks on the network.
final class LiveSender: @unchecked Sendable {
    struct Settings {
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
    }

    private struct Item {
        let input: Int
        let packet: Packet
        let isVideo: Bool
    }

    private let settings: Settings
    private let isVideoInput: [Bool]
    private let cancel = CancelFlag()
    private let exited = DispatchSemaphore(value: 0)
    private var started = false

    // Everything below is shared by the node's thread and the sender thread, under `condition`.
    private let condition = NSCondition()
    private var queue: [Item] = []
    private var queuedBytes = 0
    private var newest = Int64.min
    private var streams: [EncodedStream?]
    private var ended: [Bool]
    private var ending = false
    private var connected = false
    private var failure: MediaError?
    /// After video was dropped, what follows must wait for a keyframe (no broken reference chain).
    private var videoWaitsForKeyframe = false
    private(set) var droppedVideo = 0
    private(set) var droppedAudio = 0
    /// The live session's socket (nil between sessions), and bytes handed to it, all and audio.
    private var socket: UplinkSocket?
    /// When the session on `socket` began (`UplinkFeedback.now`).
    private var sessionStart = 0.0
    private var sentBytes = 0
    private var sentAudioBytes = 0

    init(_ settings: Settings, inputIsVideo: [Bool]) {
        self.settings = settings
        isVideoInput = inputIsVideo
        streams = Array(repeating: nil, count: inputIsVideo.count)
        ended = Array(repeating: false, count: inputIsVideo.count)
    }

    // MARK: the node's side (never blocks on the network)

    /// Queues `packet`, dropping by policy when the queue holds more than `buffer`. Offline runs
    /// wait instead while connected: there is no clock to keep up with, so nothing need be lost.
    func push(_ packet: Packet, input: Int, overMemoryLimit: Bool, out: Outlet) throws {
        startIfNeeded(out)
        condition.lock()
        // Every path changes what the sender waits for (a stream described, a packet queued).
        defer { condition.broadcast(); condition.unlock() }
        if let failure { throw failure }
        if !settings.realtime {
            // Woken by the sender taking a packet, losing the connection, failing or being cancelled.
            while connected && span(video: true) > limit && failure == nil && !cancel.isCancelled {
                condition.wait()
            }
        }
        if streams[input] == nil { streams[input] = packet.stream }
        let isVideo = isVideoInput[input]
        if isVideo && videoWaitsForKeyframe {
            if !packet.isKeyframe { droppedVideo += 1; return }
            videoWaitsForKeyframe = false
        }
        queue.append(Item(input: input, packet: packet, isVideo: isVideo))
        queuedBytes += packet.byteCount
        newest = max(newest, packet.time)
        enforceLimits(overMemoryLimit: overMemoryLimit)
    }

    func inputEnded(_ input: Int) {
        condition.lock()
        ended[input] = true
        condition.broadcast()
        condition.unlock()
    }

    /// Sessions opened again after a failure, and seconds of media queued (for `/metrics`).
    var health: (reconnects: Int, bufferedSeconds: Double) {
        condition.lock()
        defer { condition.unlock() }
        return (reconnects, Double(max(span(video: true), span(video: false))) / 1e6)
    }

    private var reconnects = 0

    /// Bytes handed to the socket over the last second or so, and the session's least round
    /// trip (node thread only).
    private var sendHistory: [(at: Double, bytes: Int, audio: Int)] = []
    private var measuredSession = 0.0
    private var leastRoundTrip = Double.infinity
    /// A new session first sends what queued up while it connected: that backlog says nothing of the link.
    static let settling = 2.0

    /// How the uplink copes, for an adaptive encoder: media waiting (the queue's span, what the
    /// socket holds unsent at the rate it drains, and the round trip over the session's least:
    /// what waits in the link's own queue) and, while media waits, the video bit/s
    /// the link carries (what left in the last second, or the transport's delivery rate, less
    /// the audio). Nil while not connected: a destination that is away measures no link.
    func measureUplink(destination: String, now: Double) -> UplinkFeedback.Reading? {
        condition.lock()
        let socket = self.socket
        let figures = socket.flatMap(UplinkProbe.read)
        let queued = Double(max(span(video: true), span(video: false))) / 1e6
        let (sent, audio, session) = (sentBytes, sentAudioBytes, sessionStart)
        condition.unlock()
        if session != measuredSession {
            measuredSession = session
            sendHistory.removeAll()
            leastRoundTrip = .infinity
        }
        if let rtt = figures?.roundTrip, rtt > 0 { leastRoundTrip = min(leastRoundTrip, rtt) }
        sendHistory.append((now, sent, audio))
        while sendHistory.count > 2, now - sendHistory[1].at >= 1 { sendHistory.removeFirst() }
        guard socket != nil, now - session >= Self.settling, let first = sendHistory.first, now - first.at >= 0.2 else { return nil }
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
        condition.lock()
        defer { condition.unlock() }
        return (queuedBytes, droppedVideo, droppedAudio, failure)
    }

    /// Sends what is queued (while connected, within `grace` seconds) and hangs up cleanly.
    func finish(grace: Double) {
        condition.lock()
        ending = true
        condition.broadcast()
        condition.unlock()
        guard started else { return }
        if exited.wait(timeout: .now() + grace) == .timedOut {
            cancelAndWake()
            exited.wait()
        }
        exited.signal() // stays signalled: the thread has exited, for a later abort or finish
        dropAll()
    }

    /// Cancels every blocking call, and wakes every wait on `condition` to see it.
    private func cancelAndWake() {
        cancel.cancel()
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Hangs up at once (the run failed elsewhere).
    func abort() {
        cancel.cancel()
        condition.lock()
        ending = true
        condition.broadcast()
        condition.unlock()
        if started { exited.wait(); exited.signal() }
        dropAll()
    }

    private func startIfNeeded(_ out: Outlet) {
        guard !started else { return }
        started = true
        let thread = Thread { [self] in
            self.sendLoop(out)
            self.exited.signal()
        }
        thread.name = out.nodeName + "-send"
        thread.start()
    }

    // MARK: drop policy (under `condition`)

    /// `buffer`, but at most `adaptiveBuffer` when an adaptive encoder feeds the sink: its viewers
    /// are promised a delay that stays short while the bitrate comes down, so a backlog past it
    /// gives way at once (a run of pictures to the next keyframe) instead of arriving late.
    private var limit: Int64 {
        let adaptive = streams.contains { $0?.uplink != nil }
        return Int64((adaptive ? min(settings.buffer, Self.adaptiveBuffer) : settings.buffer) * 1e6)
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

    /// Media time from the oldest queued packet of one kind to the newest packet of any kind.
    private func span(video: Bool) -> Int64 {
        guard let oldest = queue.first(where: { $0.isVideo == video }) else { return 0 }
        return newest - oldest.packet.time
    }

    /// Video goes first, a whole run up to the next keyframe at a time; audio is kept twice as
    /// long, because it is cheap (128 kbit/s: 2 s is 32 kB) and a gap in it is what people notice.
    /// Over the pipeline's memory limit (whoever filled it) the video kept shrinks to a quarter of
    /// `buffer`: a backlog gives way, but a network that keeps up loses nothing.
    private func enforceLimits(overMemoryLimit: Bool) {
        let videoLimit = overMemoryLimit ? limit / 4 : limit
        while span(video: true) > videoLimit { dropVideoToNextKeyframe() }
        while span(video: false) > 2 * limit { dropOldestAudio() }
    }

    /// Drops the oldest queued video packet and every video packet after it up to (not
    /// including) the next keyframe; when no keyframe is queued, all video, and what arrives
    /// next waits for one.
    private func dropVideoToNextKeyframe() {
        guard let first = queue.firstIndex(where: \.isVideo) else { return }
        var next: Int?
        for i in queue.indices where i > first && queue[i].isVideo && queue[i].packet.isKeyframe {
            next = i
            break
        }
        let end = next ?? queue.count
        let before = queue.count
        var bytes = 0
        var kept: [Item] = []
        kept.reserveCapacity(queue.count)
        for (i, item) in queue.enumerated() {
            if item.isVideo && i >= first && i < end { bytes += item.packet.byteCount } else { kept.append(item) }
        }
        queue = kept
        queuedBytes -= bytes
        droppedVideo += before - kept.count
        if next == nil { videoWaitsForKeyframe = true }
    }

    private func dropOldestAudio() {
        guard let i = queue.firstIndex(where: { !$0.isVideo }) else { return }
        queuedBytes -= queue[i].packet.byteCount
        queue.remove(at: i)
        droppedAudio += 1
    }

    /// A new session starts on a video keyframe: video before it goes, and audio older than it.
    /// False while no keyframe is queued yet (the session waits for one).
    private func trimToKeyframe() -> Bool {
        let videoExpected = isVideoInput.indices.contains { isVideoInput[$0] && streams[$0] != nil && !ended[$0] }
        guard videoExpected || queue.contains(where: \.isVideo) else { return true }
        guard let k = queue.firstIndex(where: { $0.isVideo && $0.packet.isKeyframe }) else {
            let before = queue.count
            queue.removeAll { item in
                if item.isVideo { queuedBytes -= item.packet.byteCount }
                return item.isVideo
            }
            droppedVideo += before - queue.count
            if before != queue.count { videoWaitsForKeyframe = true }
            return false
        }
        // Audio a little ahead of the keyframe stays: the encoder's priming packet starts a few
        // milliseconds early, and players start audio and video together anyway.
        let start = queue[k].packet.time - 50_000
        var kept: [Item] = []
        for (i, item) in queue.enumerated() {
            if i < k && (item.isVideo || item.packet.time < start) {
                queuedBytes -= item.packet.byteCount
                if item.isVideo { droppedVideo += 1 } else { droppedAudio += 1 }
            } else {
                kept.append(item)
            }
        }
        // Queued in arrival order, audio can sit before the keyframe with a later time (the video
        // encoder's delay is longer). FLV takes the session's first packet as its time origin and
        // refuses anything earlier (EINVAL, a disconnect at once), so the session opens in time order.
        queue = kept.enumerated().sorted { a, b in
            a.element.packet.time != b.element.packet.time ? a.element.packet.time < b.element.packet.time : a.offset < b.offset
        }.map(\.element)
        return true
    }

    private func dropAll() {
        condition.lock()
        for item in queue { if item.isVideo { droppedVideo += 1 } else { droppedAudio += 1 } }
        queue.removeAll()
        queuedBytes = 0
        condition.unlock()
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
                let muxer = session.0
                condition.lock()
                connected = true
                socket = muxer.uplinkSocket
                if case .tcp(let fd)? = socket { Self.keepBacklogQueued(fd) }
                sessionStart = UplinkFeedback.now
                condition.broadcast()
                condition.unlock()
                out.report(state: "sending")
                if let lostAt {
                    condition.lock()
                    reconnects += 1
                    condition.unlock()
                    out.event(ReconnectedEvent(url: settings.shownURL, attempts: attempt,
                                               after: (Date().timeIntervalSince(lostAt) * 1000).rounded() / 1000))
                }
                attempt = 0
                lostAt = nil
                do {
                    try send(session)
                    forgetSocket()
                    try muxer.finish()
                    out.report(state: "ended")
                    return
                } catch is Cancelled {
                    forgetSocket()
                    muxer.close()
                    return
                } catch {
                    forgetSocket()
                    muxer.close()
                    condition.lock()
                    connected = false
                    let stop = ending
                    condition.broadcast()
                    condition.unlock()
                    out.event(DisconnectedEvent(url: settings.shownURL, reason: Redaction.text("\(error)")))
                    lostAt = Date()
                    if stop {
                        out.warning("the stream to \(settings.shownURL) broke while ending: what was still queued is not sent")
                        return
                    }
                }
            } catch {
                if cancel.isCancelled { return }
                lostAt = lostAt ?? Date()
                condition.lock()
                let stop = ending
                condition.unlock()
                if stop {
                    out.warning("the run ended while \(settings.shownURL) was unreachable (\(Redaction.text("\(error)"))): what was queued is not sent")
                    return
                }
                if attempt >= settings.attempts {
                    let tries = attempt + 1
                    condition.lock()
                    failure = MediaError("cannot reach \(settings.shownURL): \(Redaction.text("\(error)")) (\(tries) attempt\(tries == 1 ? "" : "s"))")
                    condition.broadcast()
                    condition.unlock()
                    out.report(state: "failed")
                    return
                }
            }
            // Backoff before the next attempt: the first delay, doubling up to the longest.
            attempt += 1
            let delay = min(settings.longestDelay, settings.firstDelay * pow(2, Double(attempt - 1)))
            out.event(ReconnectingEvent(url: settings.shownURL, attempt: attempt, of: settings.attempts, delay: delay))
            out.report(state: "reconnecting")
            let deadline = Date(timeIntervalSinceNow: delay)
            condition.lock()
            while Date() < deadline && !ending && !cancel.isCancelled { _ = condition.wait(until: deadline) }
            condition.unlock()
        }
    }

    /// The socket goes before the muxer closes it: the node's thread reads it (`measureUplink`)
    /// under the same lock, so it never reads a closed, maybe reused, descriptor.
    private func forgetSocket() {
        condition.lock()
        socket = nil
        condition.unlock()
    }

    /// Waits until every input has described its stream (its first packet) or ended.
    /// False when the run ends first with nothing to send.
    private func waitForStreams() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !cancel.isCancelled {
            let known = streams.indices.allSatisfy { streams[$0] != nil || ended[$0] }
            if known && streams.contains(where: { $0 != nil }) { return !(ending && queue.isEmpty) }
            if ending || ended.allSatisfy({ $0 }) { return false }
            condition.wait() // woken by push, inputEnded, finish, abort
        }
        return false
    }

    /// A new session: connect, one stream per input that delivered media, the header.
    private func connect() throws -> (NetworkMuxer, [Int?]) {
        condition.lock()
        let described = streams
        condition.unlock()
        let muxer = try NetworkMuxer(url: settings.url, format: settings.format, timeout: settings.timeout, cancel: cancel,
                                     protocolOptions: settings.protocolOptions)
        var indices: [Int?] = []
        for s in described {
            indices.append(try s.map { try muxer.addStream($0.parameters, timeBase: $0.timeBase) })
        }
        try muxer.writeHeader(options: settings.muxerOptions)
        return (muxer, indices)
    }

    /// Sends queued packets in order until the run ends and the queue is empty.
    private func send(_ session: (NetworkMuxer, [Int?])) throws {
        let (muxer, indices) = session
        var startedOnKeyframe = false
        while true {
            condition.lock()
            var item: Item?
            while item == nil {
                if cancel.isCancelled { condition.unlock(); throw Cancelled() }
                if !startedOnKeyframe { startedOnKeyframe = trimToKeyframe() }
                if startedOnKeyframe && !queue.isEmpty {
                    item = queue.removeFirst()
                    queuedBytes -= item!.packet.byteCount
                } else if ending && (queue.isEmpty || !startedOnKeyframe && ended.allSatisfy({ $0 })) {
                    condition.unlock()
                    return
                } else {
                    condition.wait() // woken by push, inputEnded, finish, abort
                }
            }
            condition.broadcast()
            condition.unlock()
            guard let item, let index = indices[item.input] else { continue }
            let bytes = item.packet.byteCount
            try muxer.write(item.packet.av, timeBase: item.packet.timeBase, stream: index)
            condition.lock()
            sentBytes += bytes
            if !item.isVideo { sentAudioBytes += bytes }
            condition.unlock()
        }
    }
}
