import AVGraph

/// `aac passthrough: auto`: whether a frame reaching the encoder can go out as the source's own
/// AAC packet. It can while every frame so far could: the source's AAC (in an AudioSpecificConfig
/// stream, as RTMP carries it; MPEG-TS's ADTS frames are not what MP4 holds) at the encoder's rate
/// and channels, under the configuration the first one declared.
final class AacForwarding {
    private var stream: EncodedStream?
    private var configuration: SourceConfiguration?
    /// Why the first frame could not be sent on (nil once a packet was: then the change is expected).
    private(set) var refusal: String?

    /// The stream `frame`'s source packet goes out in (ours, with the source's AudioSpecificConfig),
    /// or nil when it cannot be sent on.
    func stream(for frame: Frame, shape: AudioShape, ours: EncodedStream) throws -> EncodedStream? {
        if let why = Self.refusal(frame, shape: shape, configuration: configuration) {
            refusal = stream == nil ? why : nil
            return nil
        }
        if stream == nil, let source = frame.source {
            stream = try ours.replacingExtradata(source.configuration.bytes)
            configuration = source.configuration
        }
        return stream
    }

    private static func refusal(_ frame: Frame, shape: AudioShape, configuration: SourceConfiguration?) -> String? {
        guard let source = frame.source, source.codec == "aac" else {
            return "the audio is not a network source's own AAC (mixed, resampled, or not from rtmp)"
        }
        // Every frame is asked: two bytes read, not the frame copied.
        let head = source.packet.leadingBytes(2)
        let adts = head.count == 2 && head.first == 0xFF && (head.last! & 0xF6) == 0xF0
        guard !source.configuration.bytes.isEmpty, !adts else {
            return "the source's AAC is in ADTS frames (MPEG-TS), not what an MP4 track holds"
        }
        guard frame.sampleRate == shape.rate, frame.channels == shape.channels else {
            return "the source's audio is \(frame.sampleRate) Hz \(frame.channels) channels, the encoder's \(shape.rate) Hz \(shape.channels)"
        }
        if let configuration, configuration != source.configuration { return "the source's AAC configuration changed" }
        return nil
    }
}
