import AVGraph
import Foundation

/// Options and format checks shared by the live network sinks (`rtmp`, `srt`).
enum LiveSinkOptions {
    static let reconnect = Setting.retry("reconnect", default: "{attempts: 10, backoff: 1s..30s}",
        doc: "after the connection fails or breaks: attempts in a row before the run fails, and the delay before each (doubling from the first to the longest)")
    static let buffer = Setting.duration("buffer", 0.1...60, default: "2s",
        doc: "media kept while the network does not take it (reconnecting, slow uplink); beyond it video is dropped to the next keyframe, audio only past twice this; at most 0.7s of video when an adaptive h264 feeds the sink")
    static let timeout = Setting.duration("timeout", 1...120, default: "5s",
        doc: "a server that takes nothing for this long counts as gone (then: reconnect)")

    static func common(url: Setting<String?>) -> [OptionSpec] { [url.spec, reconnect.spec, buffer.spec, timeout.spec] }

    /// `codecs`: those the sink's own writer takes (RTMP's client), instead of what libavformat's `container` holds.
    static func checkInputs(_ n: Negotiation, container: String, what: String, codecs: Set<String>? = nil) throws(NegotiationError) {
        guard !n.inputs.isEmpty else { throw NegotiationError("needs an encoded video and/or audio input") }
        for kind in [MediaKind.encodedVideo, .encodedAudio] where n.inputs.filter({ $0.format.kind == kind }).count > 1 {
            throw NegotiationError("\(what) carries one video and one audio stream; got several \(kind) inputs")
        }
        for input in n.inputs {
            let f = input.format
            guard f.kind.isEncoded, !f.codec.isEmpty else {
                throw NegotiationError("input '\(input.from)' is not an encoded stream", hint: "encode it first (h264, aac)")
            }
            if codecs.map({ !$0.contains(f.codec) }) ?? (Muxer.canHold(container: container, codec: f.codec) == false) {
                throw NegotiationError("\(what) cannot carry \(f.codec) (from '\(input.from)')", hint: "encode with h264 and aac")
            }
        }
    }
}

/// The node side of a live sink: hands packets to a `LiveSender`, keeps the pipeline's memory
/// budget informed of what it holds, reports drops, and surfaces the sender's failure.
final class LiveSinkCore {
    /// What every live sink emits besides the runtime's own events.
    static let events: [any NodeEvent.Type] = [DroppedEvent.self, ReconnectingEvent.self, ReconnectedEvent.self, DisconnectedEvent.self]
    private let sender: LiveSender
    private let buffer: Double
    private var accounted = 0
    private var reported = (video: 0, audio: 0)
    private var lastReport = Date.distantPast
    /// The adaptive encoder upstream, if any (its video packets carry it), and when this sink last measured for it.
    private var uplink: UplinkFeedback?
    private var lastMeasure = -Double.infinity
    static let measureInterval = 0.25

    init(_ setup: NodeSetup, url: Setting<String?>, format: String, muxerOptions: [String: String], protocolOptions: [String: String] = [:],
         session: LiveSessionKind = .muxer) {
        let retry = setup[LiveSinkOptions.reconnect]
        buffer = setup[LiveSinkOptions.buffer]
        sender = LiveSender(
            LiveSender.Settings(url: setup[url] ?? "", format: format, muxerOptions: muxerOptions, protocolOptions: protocolOptions,
                                attempts: retry.attempts, firstDelay: retry.first, longestDelay: retry.longest,
                                buffer: buffer, timeout: setup[LiveSinkOptions.timeout], realtime: setup.realtime, session: session),
            inputIsVideo: setup.inputs.map { $0.format.kind.isVideo })
    }

    func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let packet = buffer.packet else { return }
        if uplink == nil, let feedback = packet.stream.uplink { uplink = feedback }
        try sender.push(packet, input: input, overMemoryLimit: out.overMemoryLimit, out: out)
        try update(out)
    }

    func tick(_ out: Outlet) throws { try update(out) }

    func inputEnded(_ input: Int) { sender.inputEnded(input) }

    func finish(_ out: Outlet) throws {
        uplink?.forget(out.nodeName)
        // A slow uplink may still be sending the buffer; past that, the rest is given up.
        sender.finish(grace: buffer * 3 + 5)
        try update(out, final: true)
    }

    func abort() { sender.abort() }

    /// Tells the adaptive encoder upstream how this destination's uplink copes, four times a second.
    private func measureUplink(_ out: Outlet) {
        guard let uplink else { return }
        let now = UplinkFeedback.now
        guard now - lastMeasure >= Self.measureInterval else { return }
        lastMeasure = now
        if let reading = sender.measureUplink(destination: out.nodeName, now: now) {
            uplink.report(reading)
        } else {
            uplink.forget(out.nodeName)
        }
    }

    private func update(_ out: Outlet, final: Bool = false) throws {
        measureUplink(out)
        let s = sender.state
        let health = sender.health
        out.report("reconnects", Double(health.reconnects))
        out.report("buffered_seconds", health.bufferedSeconds)
        out.account(heldBytes: s.bytes - accounted)
        accounted = s.bytes
        let newVideo = s.video - reported.video, newAudio = s.audio - reported.audio
        if newVideo + newAudio > 0 && (final || Date().timeIntervalSince(lastReport) >= 1) {
            out.countDropped(newVideo, kind: .encodedVideo)
            out.countDropped(newAudio, kind: .encodedAudio)
            reported = (s.video, s.audio)
            lastReport = Date()
            out.event(DroppedEvent(video: s.video, audio: s.audio))
        }
        if let failure = s.failure {
            out.account(heldBytes: -accounted)
            accounted = 0
            throw failure
        }
    }
}
