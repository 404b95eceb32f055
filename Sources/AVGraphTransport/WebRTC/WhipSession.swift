import AVGraph
import Foundation

/// One WHIP publisher from its offer to its last packet, on the listener's UDP thread: the peer
/// (ICE-lite, DTLS, SRTP), then its video through the jitter buffer (NACK for what is missing)
/// and the depacketizer, its Opus as it comes, both on one timeline by their sender reports
/// (`RtpLipSync`), written as `WebRtcMediaFraming` records to the stream the source's reader
/// reads. A damaged picture is dropped with everything up to the next keyframe, which a PLI
/// asks for; receiver reports tell the sender its loss and round trip. Sans-IO: datagrams and
/// ticks in, datagrams to send out.
package final class WhipSession {
    /// The video codecs a session depacketizes (its answer takes no other).
    package static let videoCodecs: Set<String> = ["h264", "vp8", "vp9", "av1", "h265"]
    package let id: String
    package let key: String
    package let localUfrag: String
    package let created: Double
    package private(set) var lastHeard: Double
    package private(set) var connectedAt: Double?
    package private(set) var stream: PublisherStream?
    package private(set) var failure: String?
    /// What was dropped and why (STUN refused, SRTP that does not authenticate, ...), counted.
    package private(set) var dropped: [String: Int] = [:]
    package private(set) var pictures = 0, pictureDrops = 0, nacksSent = 0, plisSent = 0, audioPackets = 0

    private let peer: WebRtcPeer
    private let streams: [WebRtcMediaFraming.Stream]
    private let video: (index: Int, payloadType: UInt8, codec: String)?
    private let audio: (index: Int, payloadType: UInt8)?
    private var reorder = RtpReorderBuffer()
    private var h264 = H264Depacketizer()
    private var vp8 = Vp8Depacketizer()
    private var vp9 = Vp9Depacketizer()
    private var av1 = Av1Depacketizer()
    private var h265 = H265Depacketizer()
    private var sync: RtpLipSync<(bytes: [UInt8], key: Bool)>
    private var headerWritten = false
    private var header: [WebRtcMediaFraming.Stream]
    private var needKeyframe = true
    /// A picture was dropped for want of room: those after it reference it, so they go too, up to a keyframe.
    private var droppedSinceKeyframe = false
    private var firstVideoAt: Double?
    private var lastNack = 0.0, lastPli = 0.0, lastReport = 0.0
    private var videoSsrc: UInt32?, audioSsrc: UInt32?
    /// Per media SSRC: the highest extended sequence, packets received, the first sequence, the
    /// last sender report's middle NTP bits and when it came (for the receiver report).
    private var reception: [UInt32: (highest: UInt32, received: Int, first: UInt32, lsr: UInt32, lsrAt: Double)] = [:]
    private let senderSsrc = UInt32.random(in: 1...UInt32.max)
    /// Transport-wide congestion control feedback, when the offer asked for it.
    private var transportWide = TransportWideFeedback()
    private let transportWideID: UInt8?
    private var lastTransportFeedback = 0.0
    package private(set) var transportFeedbacks = 0
    private let announce: (PublisherStream) -> Void
    private let wake: @Sendable () -> Void
    private let capacity: Int

    /// `announce` hands the connected publisher's stream to the source; `wake` is the stream's
    /// (its reader made room, or gave it up).
    package init(id: String, key: String, answer: WebRtcAnswer, local: WebRtcAnswer.Local, certificate: DtlsCertificate, now: Double,
                 capacity: Int = 8 << 20, announce: @escaping (PublisherStream) -> Void, wake: @escaping @Sendable () -> Void) throws {
        self.id = id
        self.key = key
        localUfrag = local.ufrag
        created = now
        lastHeard = now
        peer = try WebRtcPeer(answer: answer, local: local, certificate: certificate)
        var streams: [WebRtcMediaFraming.Stream] = [], rates: [Int] = []
        var video: (Int, UInt8, String)?, audio: (Int, UInt8)?
        if let v = answer.chosen.first(where: { $0.kind == "video" }) {
            video = (streams.count, v.payloadType, v.codec.name)
            streams.append(.init(kind: "video", codec: v.codec.name, clockRate: 90000))
            rates.append(90000)
        }
        if let a = answer.chosen.first(where: { $0.kind == "audio" }) {
            audio = (streams.count, a.payloadType)
            streams.append(.init(kind: "audio", codec: "opus", clockRate: 48000, channels: 2))
            rates.append(48000)
        }
        self.video = video
        self.audio = audio
        self.streams = streams
        transportWideID = answer.chosen.compactMap(\.transportWide).first
        header = streams
        sync = RtpLipSync(rates: rates)
        if let video { sync.awaitMedia(on: video.0) }
        self.announce = announce
        self.wake = wake
        self.capacity = capacity
    }

    package var isConnected: Bool { connectedAt != nil }
    package var isEnded: Bool { failure != nil || stream?.isAbandoned == true }
    /// Where media comes from and goes back to (the address the peer nominated).
    package var address: WebRtcPeer.Address? { peer.nominated }
    /// Whether a datagram from `address` may be this peer's (it passed an ICE check).
    package func proves(_ address: WebRtcPeer.Address) -> Bool { peer.proven.contains(address) }

    /// A datagram from `source`; returns what to send back to it.
    package func receive(_ datagram: [UInt8], from source: WebRtcPeer.Address, peerName: @autoclosure () -> String, now: Double) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for event in peer.receive(datagram, from: source) {
            switch event {
            case .send(let bytes): out.append(bytes)
            case .connected:
                connectedAt = now
                let s = PublisherStream(peer: peerName(), key: key, app: "whip", format: WebRtcMediaFraming.format, capacity: capacity, wake: wake)
                stream = s
                announce(s)
            case .rtp(let packet):
                lastHeard = now
                take(packet, now: now)
            case .rtcp(let bytes):
                lastHeard = now
                for report in RtcpReports.senderReports(bytes) {
                    sync.senderReport(report)
                    reception[report.ssrc]?.lsr = report.ntpMiddle
                    reception[report.ssrc]?.lsrAt = now
                }
            case .dropped(let why):
                dropped[why, default: 0] += 1
            case .failed(let why):
                failure = why
            }
        }
        if case .some = peer.nominated, !out.isEmpty { lastHeard = now }
        return out
    }

    /// Timers: DTLS retransmission, holes given up, media released, NACK, PLI, receiver reports.
    /// Returns what to send to the peer's nominated address.
    package func tick(now: Double) -> [[UInt8]] {
        var out: [[UInt8]] = []
        if let wait = peer.retransmitIn, wait <= 0 { out += peer.retransmit() }
        guard isConnected, let outbound = peer.outbound else { return out }
        depacketize(reorder.release(now: now), now: now)
        write(sync.release(now: now))
        var rtcp: [[UInt8]] = []
        if let ssrc = videoSsrc {
            let missing = reorder.missing
            if !missing.isEmpty, now - lastNack >= 0.05 {
                rtcp.append(RtcpFeedback.nack(sender: senderSsrc, media: ssrc, lost: Array(missing.prefix(64))))
                lastNack = now
                nacksSent += 1
            }
            // A picture to start from, or to recover: asked for at most twice a second.
            let waited = firstVideoAt.map { now - $0 >= 0.3 } ?? false
            if needKeyframe, waited, now - lastPli >= 0.5 {
                rtcp.append(RtcpFeedback.pli(sender: senderSsrc, media: ssrc))
                lastPli = now
                plisSent += 1
            }
        }
        // Every 50 ms, as libwebrtc's receivers send it.
        if transportWideID != nil, now - lastTransportFeedback >= 0.05,
           let feedback = transportWide.feedback(sender: senderSsrc, media: videoSsrc ?? audioSsrc ?? 0) {
            lastTransportFeedback = now
            transportFeedbacks += 1
            rtcp.append(feedback)
        }
        if now - lastReport >= 1, !reception.isEmpty {
            lastReport = now
            rtcp.append(RtcpReports.receiverReport(sender: senderSsrc, blocks: reception.map { ssrc, r in
                let expected = Int(r.highest &- r.first) + 1
                return .init(ssrc: ssrc, cumulativeLost: Int32(clamping: max(0, expected - r.received)), highestSequence: r.highest,
                             lastSenderReport: r.lsr, delaySinceLastReport: r.lsr == 0 ? 0 : UInt32(clamping: Int((now - r.lsrAt) * 65536)))
            }))
        }
        for var packet in rtcp {
            do {
                try outbound.protectRtcp(&packet)
                out.append(packet)
            } catch {
                dropped["RTCP not protected: \(error)", default: 0] += 1
            }
        }
        return out
    }

    /// The publisher is gone (DELETE, silence, stop): its reader gets what was written, then the end.
    package func end() {
        if stream != nil, !isEnded { write(sync.release(now: .infinity)) }
        stream?.end()
    }

    private func take(_ packet: RtpPacket, now: Double) {
        noteReception(packet)
        if let id = transportWideID, let sequence = TransportWideFeedback.sequence(in: packet, id: id) {
            transportWide.received(sequence: sequence, arrival: now)
        }
        if let video, packet.payloadType == video.payloadType {
            videoSsrc = packet.ssrc
            firstVideoAt = firstVideoAt ?? now
            depacketize(reorder.push(packet, now: now), now: now)
        } else if let audio, packet.payloadType == audio.payloadType {
            audioSsrc = packet.ssrc
            audioPackets += 1
            guard !packet.payload.isEmpty else { return }
            write(sync.push(track: audio.index, ssrc: packet.ssrc, timestamp: packet.timestamp, arrival: now, payload: (Array(packet.payload), true)))
        } else {
            dropped["RTP of payload type \(packet.payloadType), not negotiated", default: 0] += 1
        }
    }

    private func noteReception(_ packet: RtpPacket) {
        let sequence = UInt32(packet.sequence)
        guard var r = reception[packet.ssrc] else {
            reception[packet.ssrc] = (sequence, 1, sequence, 0, 0)
            return
        }
        // The highest sequence, extended across wraps (the cycles in the high 16 bits).
        let delta = Int16(bitPattern: packet.sequence &- UInt16(truncatingIfNeeded: r.highest))
        if delta > 0 { r.highest = r.highest &+ UInt32(delta) }
        r.received += 1
        reception[packet.ssrc] = r
    }

    private func depacketize(_ packets: [RtpPacket], now: Double) {
        guard let video else { return }
        for packet in packets {
            let units: [(timestamp: UInt32, bytes: [UInt8], key: Bool, damaged: Bool)]
            switch video.codec {
            case "vp8": units = vp8.push(packet).map { ($0.timestamp, $0.bytes, $0.isKeyframe, $0.damaged) }
            case "vp9": units = vp9.push(packet).map { ($0.timestamp, $0.bytes, $0.isKeyframe, $0.damaged) }
            case "av1": units = av1.push(packet).map { ($0.timestamp, $0.bytes, $0.isKeyframe, $0.damaged) }
            case "h265": units = h265.push(packet).map { ($0.timestamp, $0.bytes, $0.isKeyframe, $0.damaged) }
            default: units = h264.push(packet).map { ($0.timestamp, $0.bytes, $0.isKeyframe, $0.damaged) }
            }
            for unit in units {
                if unit.damaged || unit.bytes.isEmpty {
                    needKeyframe = true
                    pictureDrops += 1
                    continue
                }
                if needKeyframe && !unit.key {
                    pictureDrops += 1
                    continue
                }
                if unit.key {
                    needKeyframe = false
                    if !headerWritten { describeVideo(unit.bytes) }
                }
                write(sync.push(track: video.index, ssrc: packet.ssrc, timestamp: unit.timestamp, arrival: now, payload: (unit.bytes, unit.key)))
            }
        }
    }

    /// The header's video facts from the first keyframe: its size (VP9's frame header, AV1's
    /// sequence header), and H.264's and HEVC's parameter sets (Annex B, as the decoder takes them).
    private func describeVideo(_ bytes: [UInt8]) {
        guard let video else { return }
        if video.codec == "vp8", bytes.count >= 10, bytes[3] == 0x9D, bytes[4] == 0x01, bytes[5] == 0x2A {
            header[video.index].width = Int(bytes[6]) | Int(bytes[7] & 0x3F) << 8
            header[video.index].height = Int(bytes[8]) | Int(bytes[9] & 0x3F) << 8
        } else if video.codec == "vp9", let size = VideoSequenceSize.vp9(frame: bytes[...]) {
            (header[video.index].width, header[video.index].height) = size
        } else if video.codec == "av1", let size = VideoSequenceSize.av1(obus: bytes[...]).first {
            (header[video.index].width, header[video.index].height) = size
        } else if video.codec == "h264" {
            var sets: [UInt8] = []
            for unit in Self.annexBUnits(bytes) where unit.first.map({ [7, 8].contains($0 & 0x1F) }) == true {
                if unit[unit.startIndex] & 0x1F == 7, let size = H264PictureSize.of(sps: unit) {
                    (header[video.index].width, header[video.index].height) = size
                }
                sets += [0, 0, 0, 1] + unit
            }
            header[video.index].extradata = sets
        } else if video.codec == "h265" {
            // VPS, SPS, PPS (types 32-34).
            var sets: [UInt8] = []
            for unit in Self.annexBUnits(bytes) where unit.first.map({ (32...34).contains(H265Depacketizer.type($0)) }) == true {
                if let size = VideoSequenceSize.hevc(sps: unit) { (header[video.index].width, header[video.index].height) = size }
                sets += [0, 0, 0, 1] + unit
            }
            header[video.index].extradata = sets
        }
    }

    /// The NAL units of an Annex B access unit (start codes of 3 or 4 bytes).
    static func annexBUnits(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        bytes.withUnsafeBytes { H264Packetizer.units($0, lengthSize: nil) }.map { bytes[$0] }
    }

    private func write(_ released: [RtpLipSync<(bytes: [UInt8], key: Bool)>.Released]) {
        guard let stream, !released.isEmpty else { return }
        if !headerWritten {
            headerWritten = true
            stream.append(WebRtcMediaFraming.encodeHeader(header, started: sync.epochArrival))
        }
        for r in released {
            let isVideo = r.track == video?.index
            // A reader behind by the stream's capacity: UDP cannot be held, so media is dropped
            // (pictures up to the next keyframe, which a PLI asks for).
            if isVideo && r.payload.key { droppedSinceKeyframe = false }
            if stream.isFull || (isVideo && droppedSinceKeyframe) {
                if isVideo {
                    needKeyframe = true
                    droppedSinceKeyframe = true
                    pictureDrops += 1
                }
                continue
            }
            if isVideo { pictures += 1 }
            let rate = Double(header[r.track].clockRate)
            stream.append(WebRtcMediaFraming.encodePacket(stream: r.track, key: r.payload.key, time: Int64((r.seconds * rate).rounded()), bytes: r.payload.bytes))
        }
    }
}
