/// The compressed picture a decoded picture was made from, as its network source received it:
/// an encoder that meets the picture unchanged can send this packet on instead of encoding the
/// pixels again (`h264 passthrough: auto`). It travels with the frame through `ref()` (the same
/// pixels); a node that makes new pixels (`copyProperties`, a card) leaves it behind, which is
/// what tells the encoder that the picture changed.
public final class SourcePicture: Sendable {
    /// The packet as received (its timestamps in `packet.timeBase`, the source stream's).
    public let packet: Packet
    /// Codec name and the stream's decoder configuration when this packet came (for H.264 an
    /// `avcC` record): packets are only interchangeable under the same configuration.
    public let codec: String
    public let configuration: SourceConfiguration
    /// Publisher session and the packet's place in its decode order: two pictures are
    /// consecutive in the source only when their numbers are.
    public let session: Int
    public let sequence: Int

    public init(packet: Packet, codec: String, configuration: SourceConfiguration, session: Int, sequence: Int) {
        self.packet = packet
        self.codec = codec
        self.configuration = configuration
        self.session = session
        self.sequence = sequence
    }

    public var isKeyframe: Bool { packet.isKeyframe }
}

/// A source stream's decoder configuration (extradata), shared by every picture under it.
public final class SourceConfiguration: Sendable, Equatable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static func == (a: SourceConfiguration, b: SourceConfiguration) -> Bool { a === b || a.bytes == b.bytes }
}
