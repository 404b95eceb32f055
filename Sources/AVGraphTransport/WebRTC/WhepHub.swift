import AVGraph
import Foundation
import Synchronization

/// avgraph's WebRTC viewers (WHEP, RFC 9725's playback side): every `whep` sink of a run shares
/// one UDP port and one thread. An offer is answered on the HTTP server's thread and handed over;
/// the sinks hand over their packets, packetized once; on the hub's thread each connected viewer
/// of that sink gets them with its own header and its own SRTP, gated by its own state (waiting
/// for a keyframe, a congested link). A datagram from a known address goes to its viewer, an ICE
/// check from a new one to the viewer its USERNAME names; anything else is dropped and counted.
/// A viewer that has not connected within `handshakeTimeout` is released without touching the
/// others; one silent for `silence` (no RTCP, no consent check) is gone.
// @unchecked: the viewers are the hub thread's alone; what other threads hand over goes through `inbox`.
package final class WhepHub: PublisherListener, @unchecked Sendable {
    package struct Settings: Sendable {
        package var host: String
        package var udpPort: Int
        package var advertise: [String] = []
        package var handshakeTimeout = 10.0
        package var silence = 15.0
        /// Viewers between their offer and their connection, at most (more: 503).
        package var handshakes = 1024
        package init(host: String, udpPort: Int) { (self.host, self.udpPort) = (host, udpPort) }
    }

    /// One sink's broadcast, as the HTTP side answers offers for it.
    package struct Broadcast: Sendable {
        package var video: WhepAnswer.Outgoing?
        package var audio: WhepAnswer.Outgoing?
        package var maxViewers: Int
        package var keyframes: KeyframeRequests?
        package init(video: WhepAnswer.Outgoing?, audio: WhepAnswer.Outgoing?, maxViewers: Int, keyframes: KeyframeRequests?) {
            (self.video, self.audio, self.maxViewers, self.keyframes) = (video, audio, maxViewers, keyframes)
        }
    }

    /// What a sink reads back: its viewers now, those ever connected, and what was done for them.
    package struct Tally: Sendable, Equatable {
        package var connected = 0, served = 0
        /// The newest viewer's first picture, seconds after its offer.
        package var lastFirstPicture: Double?
        package init() {}
    }

    package struct Reply: Sendable {
        package var status: Int
        package var headers: [String: String] = [:]
        package var body: String = ""
    }

    private struct Handed: @unchecked Sendable { let viewer: WhepViewer }

    private struct Inbox {
        var incoming: [Handed] = []
        var deleted: [String] = []
        /// Viewers alive by id: their sink, whether connected.
        var alive: [String: (node: String, connected: Bool)] = [:]
        var broadcasts: [String: Broadcast] = [:]
        var packets: [(node: String, kind: WhepViewer.Kind, packets: [RtpOutgoing], at: Double)] = []
        var queued = 0
        var tallies: [String: Tally] = [:]
        /// Sinks whose video lost packets in the queue (their viewers wait for a keyframe).
        var gaps: Set<String> = []
    }

    package let settings: Settings
    package let boundUdpPort: Int
    private let certificate: DtlsCertificate
    private let candidates: [(address: String, port: Int)]
    private let inbox = Mutex(Inbox())
    private let udp: Int32
    // The hub thread's own.
    private var viewers: [String: WhepViewer] = [:]
    private var byUfrag: [String: WhepViewer] = [:]
    private var byAddress: [UdpPeer: WhepViewer] = [:]
    private var replyTo: [String: UdpPeer] = [:]
    /// Each viewer's congestions already said.
    private var noted: [String: Int] = [:]
    /// Viewers whose first picture went into their sink's tally.
    private var firstSeen: Set<String> = []
    /// Where each packet is written and protected before it is sent: one buffer, no allocation per packet.
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
    /// Packets queued for the hub's thread at most; past it the oldest go (every viewer then sees the gap).
    static let queueLimit = 8192
    static let queueAge = 1.0

    package init(_ settings: Settings) throws {
        self.settings = settings
        certificate = try DtlsCertificate()
        let bare = settings.host.hasPrefix("[") ? String(settings.host.dropFirst().dropLast()) : settings.host
        let (fd, port) = try WebRtcUdpSocket.bindUdp(bare, settings.udpPort)
        (udp, boundUdpPort) = (fd, port)
        do {
            candidates = settings.advertise.isEmpty ? WebRtcUdpSocket.localAddresses(bare).map { ($0, port) }
                : try settings.advertise.map { try WebRtcUdpSocket.candidate($0, port: port) }
            try super.init(threadName: "whep-media")
        } catch {
            close(fd)
            throw error
        }
        WebRtcUdpSocket.enlargeSendBuffer(udp)
    }

    deinit {
        close(udp)
        scratch.deallocate()
    }

    // MARK: Sinks (their threads)

    package func add(node: String, _ broadcast: Broadcast) { inbox.withLock { $0.broadcasts[node] = broadcast; $0.tallies[node] = $0.tallies[node] ?? Tally() } }

    package func update(node: String, _ change: (inout Broadcast) -> Void) {
        inbox.withLock { if var b = $0.broadcasts[node] { change(&b); $0.broadcasts[node] = b } }
    }

    /// The sink is done: its viewers are released.
    package func remove(node: String) {
        let ids = inbox.withLock { inbox -> [String] in
            inbox.broadcasts[node] = nil
            let ids = inbox.alive.filter { $0.value.node == node }.map(\.key)
            inbox.deleted += ids
            return ids
        }
        if !ids.isEmpty { poke() }
    }

    /// One access unit's (or audio packet's) packets for every viewer of `node`.
    package func publish(node: String, kind: WhepViewer.Kind, _ packets: [RtpOutgoing]) {
        inbox.withLock { inbox in
            let now = Monotonic.now
            inbox.packets.append((node, kind, packets, now))
            inbox.queued += packets.count
            // Past the limit, or older than a second (the hub's thread cannot keep up), the oldest
            // go: better late pictures dropped than every viewer falling behind; the sink's viewers
            // then start again at a keyframe (what follows a lost picture refers to it).
            while !inbox.packets.isEmpty, inbox.queued > Self.queueLimit || now - inbox.packets[0].at > Self.queueAge {
                let gone = inbox.packets.removeFirst()
                inbox.queued -= gone.packets.count
                if gone.kind == .video { inbox.gaps.insert(gone.node) }
            }
        }
        poke()
    }

    package func tally(node: String) -> Tally { inbox.withLock { $0.tallies[node] ?? Tally() } }

    // MARK: HTTP (the server's threads)

    /// A viewer's offer for `node`'s broadcast: 201 with the answer and its session's `Location`.
    package func offer(node: String, sdp text: String, sessionPath: String) -> Reply {
        let state = inbox.withLock { inbox -> (Broadcast?, connected: Int, pending: Int) in
            let b = inbox.broadcasts[node]
            let mine = inbox.alive.values.filter { $0.node == node }
            return (b, mine.filter(\.connected).count, inbox.alive.values.filter { !$0.connected }.count)
        }
        guard let broadcast = state.0 else { return Reply(status: 404, body: "no broadcast named '\(node)'\n") }
        if state.connected >= broadcast.maxViewers { return Reply(status: 503, body: "'\(node)' has its \(broadcast.maxViewers) viewers (max-viewers)\n") }
        if state.pending >= settings.handshakes { return Reply(status: 503, body: "too many viewers are connecting\n") }
        let parsed: SessionDescription
        do { parsed = try SessionDescription.parse(text) } catch { return Reply(status: 400, body: "the offer is not SDP: \(error)\n") }
        let local = WebRtcAnswer.Local(ufrag: WebRtcPortLoop.token(8), password: WebRtcPortLoop.token(24), fingerprint: certificate.fingerprint, candidates: candidates)
        let id = WebRtcPortLoop.token(16)
        do {
            let answer = try WhepAnswer(offer: parsed, local: local, sessionID: UInt64.random(in: 1...UInt64(Int64.max)),
                                        sending: [broadcast.video, broadcast.audio].compactMap { $0 }, streamName: "avgraph-\(node)")
            let viewer = try WhepViewer(id: id, node: node, answer: answer, local: local, certificate: certificate, now: Monotonic.now)
            inbox.withLock {
                $0.incoming.append(Handed(viewer: viewer))
                $0.alive[id] = (node, false)
            }
            poke()
            return Reply(status: 201, headers: ["Content-Type": "application/sdp", "Location": "\(sessionPath)/\(id)"], body: answer.sdp)
        } catch let refusal as WebRtcAnswer.Refusal {
            return Reply(status: refusal.status, body: refusal.description + "\n")
        } catch {
            return Reply(status: 500, body: "\(error)\n")
        }
    }

    /// `DELETE` of a session: the viewer leaves.
    package func delete(node: String, id: String) -> Bool {
        let known = inbox.withLock { inbox in
            guard inbox.alive[id]?.node == node else { return false }
            inbox.deleted.append(id)
            return true
        }
        if known { poke() }
        return known
    }

    package func exists(node: String, id: String) -> Bool { inbox.withLock { $0.alive[id]?.node == node } }

    private static func token(_ count: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }

    // MARK: The hub's thread

    package override func run() {
        var port = WebRtcPortLoop(fd: udp)
        var lastTick = 0.0
        while !isStopped {
            if port.wait(wake: wake[0]) { drainWake() }
            adopt()
            var strangers = 0
            port.receiveWaiting { if !receive($0, from: $1) { strangers += 1 } }
            port.countStrangers(strangers)
            distribute()
            let now = Monotonic.now
            if now - lastTick >= 0.01 {
                lastTick = now
                tick(now)
            }
            if let count = port.strangersToSay(now: now) {
                note("whep: dropped \(count) datagrams from addresses of no viewer (garbage, a stranger, or a viewer already gone)")
            }
        }
        viewers.removeAll()
    }

    private func adopt() {
        let (incoming, deleted) = inbox.withLock { inbox in
            defer { inbox.incoming.removeAll(); inbox.deleted.removeAll() }
            return (inbox.incoming, inbox.deleted)
        }
        for handed in incoming {
            viewers[handed.viewer.id] = handed.viewer
            byUfrag[handed.viewer.localUfrag] = handed.viewer
        }
        for id in deleted { if let v = viewers[id] { release(v, why: nil) } }
    }

    /// The sinks' packets to their viewers.
    private func distribute() {
        let batches = inbox.withLock { inbox in
            defer { inbox.packets.removeAll(keepingCapacity: true); inbox.queued = 0 }
            return inbox.packets
        }
        guard !batches.isEmpty else { return }
        let now = Monotonic.now
        var byNode: [String: [WhepViewer]] = [:]
        for v in viewers.values where v.isConnected { byNode[v.node, default: []].append(v) }
        let gaps = inbox.withLock { inbox in
            defer { inbox.gaps.removeAll() }
            return inbox.gaps
        }
        for node in gaps {
            note("whep: \(node): packets waited over \(Self.seconds(Self.queueAge)) to be sent (the machine is too busy for its viewers): dropped, its viewers start again at a keyframe")
            for viewer in byNode[node] ?? [] { viewer.restartAtKeyframe() }
        }
        for batch in batches {
            guard let audience = byNode[batch.node] else { continue }
            for viewer in audience where viewer.takes(batch.kind) {
                guard let peer = replyTo[viewer.id] else { continue }
                for packet in batch.packets {
                    guard let length = viewer.send(packet, kind: batch.kind, now: now, into: scratch) else { continue }
                    // A datagram the kernel refuses is a lost packet to the viewer: its NACK or its next keyframe mends it.
                    WebRtcPortLoop.send(udp, scratch.baseAddress, length, to: peer)
                }
            }
        }
    }

    /// Whether the datagram was some session's (false: from a stranger).
    private func receive(_ datagram: [UInt8], from peer: UdpPeer) -> Bool {
        let address = WhipListener.address(peer)
        var viewer = byAddress[peer]
        if viewer == nil, let ufrag = WebRtcPortLoop.checkedUfrag(datagram) { viewer = byUfrag[ufrag] }
        guard let viewer else { return false }
        let wasConnected = viewer.isConnected
        let replies = viewer.receive(datagram, from: address, now: Monotonic.now)
        if byAddress[peer] == nil, viewer.proves(address) { byAddress[peer] = viewer }
        if viewer.address == address { replyTo[viewer.id] = peer }
        for reply in replies { send(reply, to: peer) }
        if !wasConnected, viewer.isConnected {
            inbox.withLock { inbox in
                inbox.alive[viewer.id]?.connected = true
                inbox.tallies[viewer.node, default: Tally()].connected += 1
                inbox.tallies[viewer.node, default: Tally()].served += 1
            }
        }
        return true
    }

    private func tick(_ now: Double) {
        let unixNow = Date().timeIntervalSince1970
        var asks: Set<String> = []
        var firstPictures: [String: Double] = [:]
        for viewer in viewers.values {
            if let failure = viewer.failure { release(viewer, why: "its handshake failed: \(failure)"); continue }
            if let why = viewer.misbehaving { release(viewer, why: why); continue }
            if !viewer.isConnected, now - viewer.created > settings.handshakeTimeout {
                release(viewer, why: nil)
                continue
            }
            if viewer.isConnected, now - viewer.lastHeard > settings.silence {
                release(viewer, why: "silent for \(Self.seconds(settings.silence))")
                continue
            }
            if viewer.congestions > noted[viewer.id, default: 0] {
                noted[viewer.id] = viewer.congestions
                note("whep: \(viewer.node): a viewer (\(replyTo[viewer.id]?.description ?? "?")) lost \(Int(viewer.loss * 100)) % of the video: its pictures skip to the next keyframe")
            }
            if viewer.wantsKeyframe, viewer.isConnected {
                viewer.wantsKeyframe = false
                asks.insert(viewer.node)
            }
            if let first = viewer.firstPictureAt, firstSeen.insert(viewer.id).inserted { firstPictures[viewer.node] = first }
            let out = viewer.tick(now: now, unixNow: unixNow)
            if let peer = replyTo[viewer.id] { for d in out { send(d, to: peer) } }
        }
        inbox.withLock { inbox in
            for node in asks { inbox.broadcasts[node]?.keyframes?.request() }
            for (node, seconds) in firstPictures { inbox.tallies[node, default: Tally()].lastFirstPicture = seconds }
        }
    }

    private func release(_ viewer: WhepViewer, why: String?) {
        if let why { note("whep: \(viewer.node): a viewer (\(replyTo[viewer.id]?.description ?? "not connected")) released: \(why)") }
        viewers[viewer.id] = nil
        byUfrag[viewer.localUfrag] = nil
        byAddress = byAddress.filter { $0.value !== viewer }
        replyTo[viewer.id] = nil
        noted[viewer.id] = nil
        firstSeen.remove(viewer.id)
        inbox.withLock { inbox in
            guard let was = inbox.alive.removeValue(forKey: viewer.id) else { return }
            if was.connected { inbox.tallies[viewer.node, default: Tally()].connected -= 1 }
        }
    }

    private func send(_ bytes: [UInt8], to peer: UdpPeer) {
        _ = bytes.withUnsafeBytes { WebRtcPortLoop.send(udp, $0.baseAddress, $0.count, to: peer) }
    }
}
