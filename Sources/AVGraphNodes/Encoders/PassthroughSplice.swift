import AVGraph

/// `h264 passthrough: auto`: which pictures go out as the network source's own packets and
/// which are encoded. A source packet goes out in its picture's place when the picture reached
/// the encoder unchanged, under the configuration the output declared, and a decoder that has
/// everything sent before can decode it: a keyframe, or the direct successor of the last
/// packet sent on. Any other picture is encoded, each encoded span starting with an IDR of ours.
/// A card (a changed picture) stays on until the source's next keyframe, where its packets
/// resume: the card never gives way to a picture early.
///
/// The splice follows the source's stream, whatever size `check` expected: the encoder takes the
/// size of the pictures the source sends, and a phone that turns (a new sequence, its parameter
/// sets of another size, at a keyframe) is followed across the turn: the output's header keeps
/// the first sequence's parameter sets, so a keyframe of any other, or the first after a change,
/// goes out with its parameter sets in band.
struct PassthroughSplice {
    enum Step {
        /// Send the source's packet on; `parameters`: behind its configuration's parameter sets, in band.
        case forward(SourcePicture, parameters: Bool)
        /// Encode `picture` (at the timing of the picture that arrived); `restart`: as an IDR.
        case encode(Frame, restart: Bool)
    }

    /// The source configuration whose pictures go out as they came; nil: no passthrough (every picture encoded).
    private(set) var configuration: SourceConfiguration?
    /// The configuration the output's header declares (the first one), and the one of the last
    /// picture sent on: a decoder holds that one's parameter sets.
    private var declared: SourceConfiguration?
    private var lastConfiguration: SourceConfiguration?
    /// A new sequence of the source the output cannot carry (`follow` refused it): its pictures
    /// are encoded as they come, a card not held over them (none would ever take its place).
    private var refused: SourceConfiguration?
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

    /// Splices from now on, the output declaring `configuration` (the first picture's source's).
    mutating func start(_ configuration: SourceConfiguration) {
        self.configuration = configuration
        declared = configuration
        lastConfiguration = configuration
    }

    /// A keyframe of the source under another configuration than the one spliced starts a new
    /// sequence (the phone turned): it is followed when `carried` says the output can hold it
    /// (the same NAL length size, parameter set ids apart from the encoder's).
    mutating func follow(_ frame: Frame, carried: (SourceConfiguration) -> Bool) {
        guard let source = frame.source, source.isKeyframe, let current = configuration, source.configuration != current,
              source.configuration != refused else { return }
        guard carried(source.configuration) else {
            refused = source.configuration
            return
        }
        configuration = source.configuration
    }

    mutating func step(_ frame: Frame) -> Step {
        defer { started = true }
        if let source = frame.source, let configuration, source.configuration != refused {
            let same = source.configuration == configuration
            let follows = same && !encoding && started && lastSent.map { $0.session == source.session && $0.sequence + 1 == source.sequence } == true
            if same && source.isKeyframe || follows {
                if let since = heldSince {
                    overstay = frame.seconds - since
                    maxOverstay = max(maxOverstay, overstay)
                }
                lastSent = (source.session, source.sequence)
                encoding = false
                held = nil
                heldSince = nil
                forwarded += 1
                // A decoder seeking to this keyframe has the header's parameter sets; one
                // playing through has the last picture's.
                let parameters = source.isKeyframe && (source.configuration != declared || source.configuration != lastConfiguration)
                lastConfiguration = source.configuration
                return .forward(source, parameters: parameters)
            }
            // The source's own picture, which a decoder cannot take here (mid-GOP after our
            // pictures, after a gap, or of a new sequence before its keyframe is followed): the
            // card stays if one was on, else the picture is encoded.
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

extension PassthroughSplice {
    /// `step`, with the live gauges (`counters`: passed_through, encoded) brought up to date.
    mutating func step(_ frame: Frame, reportingTo out: Outlet) -> Step {
        let step = step(frame)
        out.report("passed_through", Double(forwarded))
        out.report("encoded", Double(encoded))
        return step
    }

    /// The run's account, for the `passthrough` event at the end.
    var event: PassthroughEvent {
        PassthroughEvent(passed: forwarded, encoded: encoded, spans: spans, maxOverstay: (maxOverstay * 1000).rounded() / 1000)
    }

    /// The first picture's source packet, when a splice can start from it: a network source's
    /// own picture (of any size: the encoder takes it). Otherwise nil, and a warning says why.
    static func firstSource(_ frame: Frame, _ out: Outlet) -> SourcePicture? {
        // A card over the source's first picture (a phone that starts behind it) tells the source's stream too.
        guard let source = frame.source ?? frame.covers else {
            refuse("the first picture is not a network source's own (a turned or resized picture, a source that decodes every picture, or not from rtmp)", out)
            return nil
        }
        return source
    }

    /// Whether an encoder at `width`x`height` must open again for `picture` (a card or a source
    /// picture to encode): a splice encodes at the size the source sends, which a turn changes.
    func resizes(_ picture: Frame, width: Int32, height: Int32) -> Bool {
        configuration != nil && (picture.width != Int(width) || picture.height != Int(height)) && picture.width > 0 && picture.height > 0
    }

    /// The warning of an encoder that cannot splice.
    static func refuse(_ why: String, _ out: Outlet) {
        out.warning("passthrough: \(why); every picture is encoded")
    }

    /// The pixels of `picture`, to encode in `frame`'s place; false when a source picture does
    /// not decode: it is left out (with a warning), as a decoding source skips it.
    static func loadPixels(_ picture: Frame, for frame: Frame, _ out: Outlet) -> Bool {
        do {
            try picture.loadPixels()
            return true
        } catch {
            out.warning("passthrough: a source picture at \(frame.seconds) s to encode did not decode (\(error)); it is left out")
            return false
        }
    }
}
