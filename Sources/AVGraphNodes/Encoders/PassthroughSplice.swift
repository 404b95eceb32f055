import AVGraph

/// `h264 passthrough: auto`: which pictures go out as the network source's own packets and
/// which are encoded. A source packet goes out in its picture's place when the picture reached
/// the encoder unchanged, under the configuration the output declared, and a decoder that has
/// everything sent before can decode it: a keyframe, or the direct successor of the last
/// packet sent on. Any other picture is encoded, each encoded span starting with an IDR of ours.
/// A card (a changed picture) stays on until the source's next keyframe, where its packets
/// resume: the card never gives way to a picture early.
struct PassthroughSplice {
    enum Step {
        case forward(SourcePicture)
        /// Encode `picture` (at the timing of the picture that arrived); `restart`: as an IDR.
        case encode(Frame, restart: Bool)
    }

    /// The source configuration the output stream declares; nil: no passthrough (every picture encoded).
    var configuration: SourceConfiguration?
    private(set) var forwarded = 0
    private(set) var encoded = 0
    /// Splices into our pictures (each an IDR of ours) and back to the source's (at its keyframes).
    private(set) var spans = 0
    /// Media time the last card stayed on after the source's pictures came back, and the longest.
    private(set) var overstay = 0.0
    private(set) var maxOverstay = 0.0
    private var lastSent: (session: Int, sequence: Int)?
    private var encoding = false
    private var started = false
    /// The last changed picture encoded: shown on while the source's pictures cannot be sent yet.
    private var held: Frame?
    private var heldSince: Double?

    mutating func step(_ frame: Frame) -> Step {
        defer { started = true }
        if let source = frame.source, let configuration, source.configuration == configuration {
            let follows = !encoding && started && lastSent.map { $0.session == source.session && $0.sequence + 1 == source.sequence } == true
            if source.isKeyframe || follows {
                if let since = heldSince {
                    overstay = frame.seconds - since
                    maxOverstay = max(maxOverstay, overstay)
                }
                lastSent = (source.session, source.sequence)
                encoding = false
                held = nil
                heldSince = nil
                forwarded += 1
                return .forward(source)
            }
            // The source's own picture, which a decoder cannot take here (mid-GOP after our
            // pictures, or after a gap): the card stays if one was on, else the picture is encoded.
            if held != nil && heldSince == nil { heldSince = frame.seconds }
            return encode(held ?? frame)
        }
        if frame.source == nil {
            held = frame
            heldSince = nil
        }
        return encode(frame)
    }

    private mutating func encode(_ picture: Frame) -> Step {
        let restart = !encoding && started
        if restart { spans += 1 }
        encoding = true
        encoded += 1
        return .encode(picture, restart: restart)
    }
}
