import Synchronization

/// The compressed picture a decoded picture was made from, as its network source received it:
/// an encoder that meets the picture unchanged can send this packet on instead of encoding the
/// pixels again (`h264 passthrough: auto`). It travels with the frame through `ref()` (the same
/// pixels); a node that makes new pixels (`copyProperties`, a card) leaves it behind, which is
/// what tells the encoder that the picture changed.
///
/// When no node downstream reads every picture (`Node.readsPixels`), the source does not decode
/// at all: the frame carries this packet and no pixels (`Frame.awaitsPixels`), and `decoding`
/// decodes them the first time a node asks (`Frame.loadPixels`).
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
    /// Decodes this picture on request; nil when the source decoded it already.
    public let decoding: (any PictureDecoding)?
    private let decoded = Mutex<Frame?>(nil)

    public init(packet: Packet, codec: String, configuration: SourceConfiguration, session: Int, sequence: Int,
                decoding: (any PictureDecoding)? = nil) {
        self.packet = packet
        self.codec = codec
        self.configuration = configuration
        self.session = session
        self.sequence = sequence
        self.decoding = decoding
    }

    public var isKeyframe: Bool { packet.isKeyframe }

    /// The picture decoded once, for every frame that carries this packet (each branch asks on its own).
    public var decodedPicture: Frame? {
        get { decoded.withLock { $0 } }
        set { decoded.withLock { $0 = newValue } }
    }
}

/// Decodes a network source's pictures when a node asks for their pixels, from the packets the
/// source kept since the keyframe before them (`SourcePicture.decoding`).
public protocol PictureDecoding: AnyObject, Sendable {
    /// `picture` decoded (its `decodedPicture` from then on).
    func decode(_ picture: SourcePicture) throws -> Frame
}

/// A source stream's decoder configuration (extradata), shared by every picture under it.
public final class SourceConfiguration: Sendable, Equatable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    public static func == (a: SourceConfiguration, b: SourceConfiguration) -> Bool { a === b || a.bytes == b.bytes }
}
