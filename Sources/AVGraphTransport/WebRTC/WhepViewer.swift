import AVGraph

/// One packet of a broadcast, packetized once for every viewer: its payload is shared (each
/// viewer writes its own header in front and encrypts its own copy), its facts tell a viewer
/// where it may start and what it may skip.
package struct RtpOutgoing: Sendable {
    package var payload: [UInt8]
    package var timestamp: UInt32
    /// The last packet of a picture (video) — RTP's marker bit.
    package var marker: Bool
    package var startsPicture: Bool
    package var keyframe: Bool
    /// Unix seconds of the media time it carries: when the run's clock was there (sender reports).
    package var wallclock: Double
    package init(payload: [UInt8], timestamp: UInt32, marker: Bool, startsPicture: Bool, keyframe: Bool, wallclock: Double) {
        (self.payload, self.timestamp, self.marker, self.startsPicture, self.keyframe, self.wallclock) = (payload, timestamp, marker, startsPicture, keyframe, wallclock)
    }
}

/// One WHEP viewer from its offer to its last packet, on the hub's UDP thread: the peer
/// (ICE-lite, DTLS, SRTP), and for each stream it takes its own payload type and sequence
/// numbers, a history of what it was sent (NACKs answered from it, at a bounded rate), sender
/// reports, and a gate: video starts at a keyframe, and a viewer whose reports show heavy loss
/// has pictures dropped up to the next keyframe, for it alone. Sans-IO: datagrams and ticks in,
/// datagrams out.
package final class WhepViewer {
    package enum Kind: Int, Sendable { case video = 0, audio = 1 }

    struct Track {
        let kind: Kind
        let payloadType: UInt8
        let ssrc: UInt32
        let nack: Bool
        var sequence = UInt16.random(in: 0...UInt16.max)
        /// What was sent, by sequence number modulo its size (NACKs look here).
        var history: [(sequence: UInt16, packet: RtpOutgoing)?]
        var waitingKeyframe: Bool
        var packets: UInt32 = 0, octets: UInt32 = 0
        var last: (timestamp: UInt32, wallclock: Double)?
    }

    package let id: String
    package let node: String
    package let localUfrag: String
    package let created: Double
    package private(set) var lastHeard: Double
    package private(set) var connectedAt: Double?
    package private(set) var failure: String?
    /// Why it should go (a NACK flood, garbage): the hub drops it.
    package private(set) var misbehaving: String?
    /// Times its reports said it lost a tenth of the video (its pictures then skipped to a keyframe).
    package private(set) var congestions = 0
    /// Fraction of video lost, as its last report said (0...1).
    package private(set) var loss = 0.0
    /// A keyframe would help this viewer (it joined, lost a picture, asked with PLI or FIR).
    package var wantsKeyframe = false
    /// Its first picture: when a keyframe reached it (seconds after `created`).
    package private(set) var firstPictureAt: Double?

    private let peer: WebRtcPeer
    private var tracks: [Track?] = [nil, nil]
    private var lastReport = 0.0
    private var retransmitBudget = 0.0, lastBudgetAt = 0.0
    private var nackWindow = (start: 0.0, asked: 0)
    private var garbageWindow = (start: 0.0, count: 0)
    private var congested = false
    private let senderSsrc = UInt32.random(in: 1...UInt32.max)
    static let historySize = 1024
    /// Retransmissions per second a viewer may have, and the NACKed packets per second past which it is dropped.
    static let retransmitRate = 400.0
    static let nackFlood = 5000

    package init(id: String, node: String, answer: WhepAnswer, local: WebRtcAnswer.Local, certificate: DtlsCertificate, now: Double) throws {
        self.id = id
        self.node = node
        localUfrag = local.ufrag
        created = now
        lastHeard = now
        peer = try WebRtcPeer(remoteFingerprint: answer.remoteFingerprint, role: answer.dtlsRole, local: local, certificate: certificate)
        for c in answer.chosen {
            let kind: Kind = c.kind == "video" ? .video : .audio
            tracks[kind.rawValue] = Track(kind: kind, payloadType: c.payloadType, ssrc: c.ssrc, nack: c.nack,
                                          history: Array(repeating: nil, count: kind == .video && c.nack ? Self.historySize : 0),
                                          waitingKeyframe: kind == .video)
        }
        wantsKeyframe = tracks[0] != nil
    }

    package var isConnected: Bool { connectedAt != nil }
    package var address: WebRtcPeer.Address? { peer.nominated }
    package func proves(_ address: WebRtcPeer.Address) -> Bool { peer.proven.contains(address) }
    package func takes(_ kind: Kind) -> Bool { tracks[kind.rawValue] != nil }

    /// A datagram from `source`; returns what to send back.
    package func receive(_ datagram: [UInt8], from source: WebRtcPeer.Address, now: Double) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for event in peer.receive(datagram, from: source) {
            switch event {
            case .send(let bytes): out.append(bytes)
            case .connected:
                connectedAt = now
                lastHeard = now
            case .rtp:
                lastHeard = now
            case .rtcp(let bytes):
                lastHeard = now
                out += feedback(bytes, now: now)
            case .dropped:
                countGarbage(now: now)
            case .failed(let why):
                failure = why
            }
        }
        // A consent check (STUN) keeps a viewer as much as its reports do.
        if isConnected, StunMessage.looksLikeStun(datagram), peer.proven.contains(source) { lastHeard = now }
        return out
    }

    private func countGarbage(now: Double) {
        if now - garbageWindow.start > 10 { garbageWindow = (now, 0) }
        garbageWindow.count += 1
        if garbageWindow.count > 1000 { misbehaving = "sent over 1000 datagrams in 10 s that were not its own (garbage, replays)" }
    }

    /// The packet for this viewer, protected, written into `scratch` (which has room for the
    /// largest packet and its SRTP trailer): its length, or nil when its gate holds it back.
    package func send(_ packet: RtpOutgoing, kind: Kind, now: Double, into scratch: UnsafeMutableRawBufferPointer) -> Int? {
        // The track is changed where it lies: a copy of it would share its history, and the
        // first write to that would copy all 1024 entries, once per packet.
        let k = kind.rawValue
        guard isConnected, let outbound = peer.outbound, tracks[k] != nil else { return nil }
        if kind == .video, tracks[k]!.waitingKeyframe {
            guard packet.keyframe && packet.startsPicture else {
                return nil
            }
            tracks[k]!.waitingKeyframe = false
            if firstPictureAt == nil { firstPictureAt = now - created }
        }
        tracks[k]!.sequence &+= 1
        let sequence = tracks[k]!.sequence
        guard let length = write(payloadType: tracks[k]!.payloadType, ssrc: tracks[k]!.ssrc, packet, sequence: sequence, into: scratch, outbound) else { return nil }
        let size = tracks[k]!.history.count
        if size > 0 { tracks[k]!.history[Int(sequence) % size] = (sequence, packet) }
        tracks[k]!.packets &+= 1
        tracks[k]!.octets &+= UInt32(truncatingIfNeeded: packet.payload.count)
        tracks[k]!.last = (packet.timestamp, packet.wallclock)
        return length
    }

    /// The video from the next keyframe on (the hub lost pictures before they were sent).
    package func restartAtKeyframe() {
        guard tracks[0] != nil else { return }
        tracks[0]!.waitingKeyframe = true
        wantsKeyframe = true
    }

    /// Header and payload into `scratch`, protected in place.
    private func write(payloadType: UInt8, ssrc s: UInt32, _ packet: RtpOutgoing, sequence: UInt16, into scratch: UnsafeMutableRawBufferPointer, _ outbound: SrtpSession) -> Int? {
        let length = 12 + packet.payload.count
        guard length + SrtpSession.maximumTrailer <= scratch.count, let base = scratch.baseAddress else { return nil }
        let t = packet.timestamp
        let header: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0x80, (packet.marker ? 0x80 : 0) | payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xFF),
             UInt8(t >> 24), UInt8(t >> 16 & 0xFF), UInt8(t >> 8 & 0xFF), UInt8(t & 0xFF),
             UInt8(s >> 24), UInt8(s >> 16 & 0xFF), UInt8(s >> 8 & 0xFF), UInt8(s & 0xFF))
        withUnsafeBytes(of: header) { base.copyMemory(from: $0.baseAddress!, byteCount: 12) }
        packet.payload.withUnsafeBytes { (base + 12).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return try? outbound.protect(base, length: length)
    }

    private func header(_ track: Track, _ packet: RtpOutgoing, sequence: UInt16) -> [UInt8] {
        let t = packet.timestamp, s = track.ssrc
        return [0x80, (packet.marker ? 0x80 : 0) | track.payloadType, UInt8(sequence >> 8), UInt8(sequence & 0xFF),
                UInt8(t >> 24), UInt8(t >> 16 & 0xFF), UInt8(t >> 8 & 0xFF), UInt8(t & 0xFF),
                UInt8(s >> 24), UInt8(s >> 16 & 0xFF), UInt8(s >> 8 & 0xFF), UInt8(s & 0xFF)]
    }

    /// What the viewer's RTCP asks: retransmissions (returned, protected), keyframes (`wantsKeyframe`).
    private func feedback(_ rtcp: [UInt8], now: Double) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for item in RtcpFromViewers.read(rtcp) {
            switch item {
            case .pictureLoss, .fullIntraRequest:
                wantsKeyframe = true
            case .nack(let media, let lost):
                guard let i = tracks.firstIndex(where: { $0?.ssrc == media }), let track = tracks[i], !track.history.isEmpty,
                      let outbound = peer.outbound else { continue }
                if now - nackWindow.start >= 1 { nackWindow = (now, 0) }
                nackWindow.asked += lost.count
                if nackWindow.asked > Self.nackFlood { misbehaving = "asked for over \(Self.nackFlood) retransmissions in a second" }
                retransmitBudget = min(Self.retransmitRate, retransmitBudget + (now - lastBudgetAt) * Self.retransmitRate)
                lastBudgetAt = now
                for sequence in lost {
                    guard retransmitBudget >= 1 else { break }
                    guard let kept = track.history[Int(sequence) % track.history.count], kept.sequence == sequence else { continue }
                    var bytes = header(track, kept.packet, sequence: sequence) + kept.packet.payload
                    guard (try? outbound.protect(&bytes)) != nil else { continue }
                    retransmitBudget -= 1
                    out.append(bytes)
                }
            case .reception(let r):
                guard let video = tracks[0], r.ssrc == video.ssrc else { continue }
                loss = Double(r.fractionLost) / 256
                // Over a tenth lost: the link cannot carry the stream. What follows a lost
                // picture is useless to it, so it waits for the next keyframe (and says it wants one).
                if loss >= 0.1, !congested {
                    congested = true
                    congestions += 1
                    tracks[0]!.waitingKeyframe = true
                } else if loss < 0.02 {
                    congested = false
                }
            }
        }
        return out
    }

    /// Timers: DTLS retransmission, a sender report per stream each second.
    package func tick(now: Double, unixNow: Double) -> [[UInt8]] {
        var out: [[UInt8]] = []
        if let wait = peer.retransmitIn, wait <= 0 { out += peer.retransmit() }
        guard isConnected, let outbound = peer.outbound, now - lastReport >= 1 else { return out }
        lastReport = now
        for track in tracks.compactMap({ $0 }) {
            guard let last = track.last else { continue }
            let rate = track.kind == .video ? 90000.0 : 48000.0
            let rtp = last.timestamp &+ UInt32(truncatingIfNeeded: Int64((unixNow - last.wallclock) * rate))
            let report = RtcpFromViewers.senderReport(ssrc: track.ssrc, ntp: unixNow, rtpTimestamp: rtp, packets: track.packets, octets: track.octets)
            var bytes = report.bytes
            if (try? outbound.protectRtcp(&bytes)) != nil { out.append(bytes) }
        }
        return out
    }
}
