/// The privacy state a producer declared for a picture, carried with the picture itself
/// (in-band): a switch lands on exactly the pictures it means, whatever the queues and threads
/// between the producer and the `privacy` node. Every node that makes a picture from another
/// carries it on (`Frame.copyProperties`, `Frame.ref`).
public struct PrivacyMark: Sendable, Equatable {
    public var on: Bool
    /// The card to show (a name from the `privacy` node's `cards`); nil: the node's current card.
    public var card: String?

    public init(on: Bool, card: String? = nil) {
        self.on = on
        self.card = card
    }

    /// Card names on the wire and in `cards:`: short, plain, printable.
    public static func isValidCardName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
        }
    }
}
