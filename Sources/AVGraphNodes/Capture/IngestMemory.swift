import AVGraph

/// An ingest source's picture buffer: `buffer` pictures of the declared `size` and `format`,
/// allocated and touched at start when `preallocate` is on (the default), and at most that many
/// queued either way.
enum IngestMemory {
    static func heldBytes(_ n: Negotiation) -> HeldMemory? {
        let size = n[IngestOptions.size], count = n[IngestOptions.buffer]
        guard let format = PushPixelFormat.allCases.first(where: { $0.name == n[IngestOptions.format] }) else { return nil }
        let picture = IngestFraming.videoPayloadSize(format, width: size.width, height: size.height)
        let when = n[IngestOptions.preallocate] ? "allocated at start" : "when the queue is full"
        return HeldMemory(bytes: count * picture, what: "\(count) pictures of \(size.width)x\(size.height) \(format.name) \(when) ('buffer' x 'size')",
                          option: "buffer")
    }
}

extension AppSourceNode: HoldsMemory {
    public static func heldBytes(_ n: Negotiation, inputBitrates: [Int?]) -> HeldMemory? { IngestMemory.heldBytes(n) }
}

extension SocketSourceNode: HoldsMemory {
    public static func heldBytes(_ n: Negotiation, inputBitrates: [Int?]) -> HeldMemory? { IngestMemory.heldBytes(n) }
}
