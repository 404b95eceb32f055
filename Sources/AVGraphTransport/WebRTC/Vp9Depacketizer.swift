/// VP9 out of RTP (RFC 9628): each packet's payload descriptor (picture id, layer indices,
/// flexible mode's reference indices, the scalability structure) taken off, each layer frame
/// joined from the packet with B to the one with E, and a picture (one RTP timestamp) handed on
/// at the marker. A picture of several spatial layers becomes one superframe (VP9's own
/// container of frames, Annex B of its specification), which is what libavcodec's decoder takes
/// as one packet. A picture with a hole, or whose start was lost, is handed on marked damaged and
/// empty, for the caller to ask for a keyframe.
package struct Vp9Depacketizer: Sendable {
    package typealias Frame = RtpVideoFrame

    /// What the descriptor says of one packet.
    struct Descriptor: Equatable {
        var interPredicted: Bool
        var beginsFrame: Bool
        var endsFrame: Bool
        /// The spatial layer (0 without layer indices).
        var spatialLayer: Int
        var data: ArraySlice<UInt8>
    }

    /// A superframe holds at most 8 frames (its index counts them in 3 bits).
    static let maxLayerFrames = 8

    package let maxBytes: Int
    private var timestamp: UInt32?
    private var layerFrames: [[UInt8]] = []
    private var byteCount = 0
    /// Between a layer frame's B and its E.
    private var inFrame = false
    private var isKeyframe = false
    private var damaged = false
    private var lastSequence: UInt16?

    package init(maxBytes: Int = 8 << 20) { self.maxBytes = maxBytes }

    /// The descriptor read off a payload; nil: malformed (a length past the payload's end).
    static func descriptor(_ p: ArraySlice<UInt8>) -> Descriptor? {
        var i = p.startIndex
        func next() -> UInt8? {
            guard i < p.endIndex else { return nil }
            defer { i += 1 }
            return p[i]
        }
        guard let first = next() else { return nil }
        let hasPictureID = first & 0x80 != 0, interPredicted = first & 0x40 != 0, hasLayers = first & 0x20 != 0
        let flexible = first & 0x10 != 0, hasStructure = first & 0x02 != 0
        if hasPictureID {
            guard let pid = next() else { return nil }
            if pid & 0x80 != 0 { guard next() != nil else { return nil } }  // M: a 15-bit picture id
        }
        var spatialLayer = 0
        if hasLayers {
            guard let layers = next() else { return nil }
            spatialLayer = Int(layers >> 1 & 0x07)
            if !flexible { guard next() != nil else { return nil } }  // TL0PICIDX
        }
        if flexible && interPredicted {
            // Up to 3 reference indices, each saying (N) whether another follows.
            for _ in 0..<3 {
                guard let diff = next() else { return nil }
                if diff & 0x01 == 0 { break }
            }
        }
        if hasStructure {
            guard let ss = next() else { return nil }
            let layers = Int(ss >> 5) + 1
            if ss & 0x10 != 0 { i += 4 * layers }  // Y: each layer's width and height
            if ss & 0x08 != 0 {  // G: the picture group
                guard let groupSize = next() else { return nil }
                for _ in 0..<groupSize {
                    guard let picture = next() else { return nil }
                    i += Int(picture >> 2 & 0x03)  // R reference indices
                }
            }
            guard i <= p.endIndex else { return nil }
        }
        return Descriptor(interPredicted: interPredicted, beginsFrame: first & 0x08 != 0, endsFrame: first & 0x04 != 0,
                          spatialLayer: spatialLayer, data: p[i...])
    }

    /// Takes one packet; returns the pictures it completed (the previous one when the timestamp
    /// moved on without a marker).
    package mutating func push(_ packet: RtpPacket) -> [Frame] {
        var done: [Frame] = []
        let gap = lastSequence.map { packet.sequence != $0 &+ 1 } ?? false
        lastSequence = packet.sequence
        if let ts = timestamp, ts != packet.timestamp {
            // The picture ended without its marker: a hole before this packet may have taken it.
            if gap { damaged = true }
            done.append(finish())
        }
        let startsPicture = timestamp == nil
        timestamp = packet.timestamp
        if let d = Self.descriptor(packet.payload) {
            // A hole is this picture's unless the picture begins whole with this packet.
            if gap && !(startsPicture && d.beginsFrame && d.spatialLayer == 0) { damaged = true }
            take(d)
        } else {
            damaged = true
        }
        if packet.marker { done.append(finish()) }
        return done
    }

    private mutating func take(_ d: Descriptor) {
        if d.beginsFrame {
            if inFrame || layerFrames.count == Self.maxLayerFrames { damaged = true }
            // Keyframe: the picture's first layer frame does not predict from an earlier picture
            // (P), is the base layer, and says so in its own header (an intra-only frame does not).
            if layerFrames.isEmpty && !damaged {
                isKeyframe = !d.interPredicted && d.spatialLayer == 0 && VideoSequenceSize.vp9(frame: d.data) != nil
            }
            inFrame = true
            // Nothing more is kept of a damaged picture (a stream of empty frames would grow without end).
            if !damaged { layerFrames.append([]) }
        } else if !inFrame {
            // The layer frame's start was lost: the rest of it is of no use.
            damaged = true
        }
        guard !damaged, inFrame else { return }
        if byteCount + d.data.count > maxBytes {
            damaged = true
            return
        }
        byteCount += d.data.count
        layerFrames[layerFrames.count - 1] += d.data
        if d.endsFrame { inFrame = false }
    }

    /// The picture so far as a frame, and a fresh start.
    private mutating func finish() -> Frame {
        let whole = !damaged && !inFrame && !layerFrames.isEmpty && !layerFrames.contains { $0.isEmpty }
        var bytes = whole ? (layerFrames.count == 1 ? layerFrames[0] : Self.superframe(layerFrames)) : []
        // The superframe's index may take a frame just under the bound past it.
        if bytes.count > maxBytes { bytes = [] }
        let frame = Frame(timestamp: timestamp ?? 0, bytes: bytes, isKeyframe: isKeyframe, damaged: bytes.isEmpty)
        timestamp = nil
        layerFrames = []
        byteCount = 0
        inFrame = false
        isKeyframe = false
        damaged = false
        return frame
    }

    /// Frames joined with a superframe index after them: a marker byte (110, the bytes per size
    /// less one, the frames less one), each size little-endian, the marker again. Empty when a
    /// frame is too large for 4 bytes of size or the joined bytes would pass the bound.
    static func superframe(_ frames: [[UInt8]]) -> [UInt8] {
        guard (1...maxLayerFrames).contains(frames.count), let largest = frames.map(\.count).max(), largest <= Int(UInt32.max) else { return [] }
        let sizeBytes = largest < 1 << 8 ? 1 : largest < 1 << 16 ? 2 : largest < 1 << 24 ? 3 : 4
        let marker = UInt8(0xC0 | (sizeBytes - 1) << 3 | (frames.count - 1))
        var out = frames.flatMap { $0 }
        out.append(marker)
        for f in frames {
            for b in 0..<sizeBytes { out.append(UInt8(truncatingIfNeeded: f.count >> (8 * b))) }
        }
        out.append(marker)
        return out
    }
}
