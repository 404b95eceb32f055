import AVGraph
import AVGraphTransport

/// The privacy switch a phone app sends in its RTMP stream: an AMF0 data message (type 18)
/// named `onPrivacy` whose first value is an object `{on: Boolean, card: String, time: Number}`
/// (`card` optional: the privacy node's current card; `time` optional, milliseconds on the
/// stream's clock, default the message's own timestamp), or the values `Boolean [, String]`.
/// It covers the publisher's pictures from that time on, as the socket framing's message does.
enum InBandPrivacy {
    static let messageName = "onPrivacy"

    static func apply(_ values: [Amf0Value], timestamp: UInt32, to timeline: PrivacyTimeline) {
        guard let parsed = parse(values, timestamp: timestamp) else { return }
        if let card = parsed.card, !PrivacyMark.isValidCardName(card) { return }
        _ = timeline.schedule(on: parsed.on, card: parsed.card, time: parsed.time)
    }

    static func parse(_ values: [Amf0Value], timestamp: UInt32) -> (on: Bool, card: String?, time: Double)? {
        var time = Double(timestamp) / 1000
        guard let first = values.first else { return nil }
        if case .bool(let on) = first { return (on, values.dropFirst().first?.string, time) }
        guard case .bool(let on)? = first["on"] else { return nil }
        if let ms = first["time"]?.number, ms.isFinite, ms >= 0 { time = ms / 1000 }
        return (on, first["card"]?.string, time)
    }
}
