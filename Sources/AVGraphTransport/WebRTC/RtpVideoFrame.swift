/// A picture (VP8, VP9) or temporal unit (AV1) reassembled out of RTP: what each of those
/// depacketizers hands on per RTP timestamp. A damaged one is empty: a packet of it was missing
/// or malformed, and the caller asks for a keyframe.
package struct RtpVideoFrame: Equatable, Sendable {
    package var timestamp: UInt32
    package var bytes: [UInt8]
    package var isKeyframe: Bool
    package var damaged: Bool
    package init(timestamp: UInt32, bytes: [UInt8], isKeyframe: Bool, damaged: Bool) {
        self.timestamp = timestamp
        self.bytes = bytes
        self.isKeyframe = isKeyframe
        self.damaged = damaged
    }
}
