import AVGraph
import AVGraphTransport
import CFFmpeg
import Synchronization

/// A network source's AAC frames decoded only when a node asks for their samples: when the
/// source's audio goes only to nodes that do not read samples (`NodeSetup.samplesOnRequest`: an
/// `aac` sending the phone's packets on), the source decoded every frame only to time it by its
/// samples. AAC-LC's frames are 1024 samples each, so the packet times the frame as well; the
/// session's first frames are decoded anyway, to check that the decoder makes of them what the
/// AudioSpecificConfig says (an HE-AAC stream may say AAC-LC and carry SBR: twice the samples),
/// and the frames after go out pending. A frame asked for is decoded after the packet before it,
/// whose window the frame overlaps; frames asked for in order (an encoder taking over) cost one
/// decode each. One thread at a time decodes, whichever asks.
final class SamplesOnRequest: Sendable {
    /// AAC-LC's samples per frame (the AudioSpecificConfig's frameLengthFlag 0).
    static let frameLength = 1024
    /// Decoded frames that must match the configuration before frames go out pending.
    static let checkedFrames = 2

    /// One pending frame's way to its samples: the packet before it primes the decoder.
    private final class Decoding: PictureDecoding {
        let owner: SamplesOnRequest
        let previous: Packet?

        init(owner: SamplesOnRequest, previous: Packet?) {
            self.owner = owner
            self.previous = previous
        }

        func decode(_ frame: SourcePicture) throws -> Frame { try owner.decode(frame, after: previous) }
    }

    private struct Reading {
        /// A decoded frame of the shape the configuration declares, once `checkedFrames` were.
        var shape: Frame?
        var checked = 0
        /// The frames are not what the configuration says (or it changed): all decoded by the session.
        var givenUp = false
        var previous: Packet?
        var sequence = 0
    }

    private struct Position: ~Copyable {
        var decoder: Decoder?
        /// The sequence of the frame the decoder takes next without priming.
        var next: Int?
    }

    private let stream: EncodedStream
    private let configuration: SourceConfiguration
    private let declared: (rate: Int, channels: Int)
    private let session: Int
    /// The decoding thread's alone (a Mutex nobody else takes).
    private let reading = Mutex(Reading())
    private let position = Mutex(Position())

    init?(stream: EncodedStream, session: Int) {
        let asc = stream.extradata
        guard let declared = Self.lowComplexity(asc) else { return nil }
        self.stream = stream
        self.session = session
        self.declared = declared
        configuration = SourceConfiguration(bytes: asc)
    }

    /// Rate and channels of an AudioSpecificConfig for AAC-LC in 1024-sample frames with its
    /// channels in the configuration (1 to 7: no program config element); nil for anything else.
    static func lowComplexity(_ asc: [UInt8]) -> (rate: Int, channels: Int)? {
        var bits = H264PictureSize.BitReader(plain: asc.prefix(8)[...])
        guard bits.read(5) == 2, let index = bits.read(4), index < 13 else { return nil }
        let rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]
        guard let channels = bits.read(4), (1...7).contains(channels), bits.read(1) == 0 else { return nil }
        return (rates[Int(index)], channels == 7 ? 8 : Int(channels))
    }

    /// A frame the session decoded itself, while its first frames are checked against the configuration.
    func check(_ av: UnsafePointer<AVFrame>) {
        reading.withLock { r in
            guard !r.givenUp, r.checked < Self.checkedFrames else { return }
            let f = av.pointee
            guard f.nb_samples == Int32(Self.frameLength), Int(f.sample_rate) == declared.rate,
                  Int(f.ch_layout.nb_channels) == declared.channels else {
                r.givenUp = true
                return
            }
            r.checked += 1
            if r.shape == nil {
                let header = Frame(timeBase: stream.timeBase)
                header.av.pointee.sample_rate = f.sample_rate
                header.av.pointee.format = f.format
                var layout = f.ch_layout
                av_channel_layout_copy(&header.av.pointee.ch_layout, &layout)
                r.shape = header
            }
        }
    }

    /// `av` (an audio packet) as a frame still to decode, with its duration in the stream's time
    /// base; nil while the session decodes its audio itself (the first frames, or for good).
    func pending(_ av: UnsafeMutablePointer<AVPacket>) -> (frame: Frame, duration: Int64)? {
        reading.withLock { r in
            let packet = Packet(referencing: av, stream: stream)
            defer {
                r.previous = packet
                r.sequence += 1
            }
            if Self.leavesChecked(packet) { r.givenUp = true }
            guard !r.givenUp, r.checked >= Self.checkedFrames, let shape = r.shape, av.pointee.pts != avg_nopts() else { return nil }
            let source = SourcePicture(packet: packet, codec: "aac", configuration: configuration, session: session, sequence: r.sequence,
                                       decoding: Decoding(owner: self, previous: r.previous))
            let frame = Frame.pendingSamples(Self.frameLength, like: shape, timeBase: stream.timeBase, source: source)
            frame.pts = av.pointee.pts
            let duration = av_rescale_q(Int64(Self.frameLength), AVRational(num: 1, den: Int32(declared.rate)), stream.timeBase.av)
            frame.av.pointee.pkt_duration = duration
            return (frame, duration)
        }
    }

    /// How long `av`'s frame is when `pending` makes it a pending frame; nil when it would not
    /// (the session decodes it). Tells the reader it may hand the frame on itself.
    func pendingSeconds(_ av: UnsafeMutablePointer<AVPacket>) -> Double? {
        let pends = reading.withLock { r in !r.givenUp && r.checked >= Self.checkedFrames && r.shape != nil }
        guard pends, av.pointee.pts != avg_nopts(), !Self.leavesChecked(Packet(referencing: av, stream: stream)) else { return nil }
        return Double(Self.frameLength) / Double(declared.rate)
    }

    /// A new configuration, or ADTS framing: not what this session checked.
    private static func leavesChecked(_ packet: Packet) -> Bool {
        let head = packet.leadingBytes(2)
        return packet.newExtradata != nil || head.count == 2 && head[0] == 0xFF && head[1] & 0xF6 == 0xF0
    }

    private func decode(_ frame: SourcePicture, after previous: Packet?) throws -> Frame {
        try position.withLock { p in
            if let done = frame.decodedPicture { return done }
            if p.decoder == nil {
                p.decoder = try Decoder(parameters: stream.parameters, timeBase: stream.timeBase, threads: 1)
                p.next = nil
            }
            let decoder = p.decoder!
            if p.next != frame.sequence {
                // Not the frame after the last one decoded: the packet before primes the decoder
                // (its window overlaps this frame's), what it gives is thrown away.
                decoder.reset()
                if let previous {
                    try decoder.send(previous.av)
                    while let primed = try decoder.receive() { _ = Frame(owning: primed, timeBase: stream.timeBase) }
                }
            }
            try decoder.send(frame.packet.av)
            p.next = frame.sequence + 1
            var decoded: Frame?
            while let av = try decoder.receive() { decoded = Frame(owning: av, timeBase: stream.timeBase) }
            guard let decoded else {
                p.next = nil
                throw MediaError("the source's AAC frame at \(frame.packet.pts) did not decode (damaged?)")
            }
            frame.decodedPicture = decoded
            return decoded
        }
    }
}
