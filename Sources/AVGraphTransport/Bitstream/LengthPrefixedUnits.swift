import CFFmpeg

/// The NAL units of a length-prefixed H.264/HEVC packet (MP4/FLV framing: each unit behind a
/// big-endian length of `lengthSize` bytes), as views into the bytes (nothing copied). Ends at
/// the first length that is zero or runs past the end.
package struct LengthPrefixedUnits<Bytes: Collection>: Sequence, IteratorProtocol where Bytes.Element == UInt8, Bytes.Index == Int {
    private let bytes: Bytes
    private let lengthSize: Int
    private var at: Int

    package init(_ bytes: Bytes, lengthSize: Int) {
        self.bytes = bytes
        self.lengthSize = lengthSize
        at = bytes.startIndex
    }

    package mutating func next() -> Bytes.SubSequence? {
        guard lengthSize > 0, at + lengthSize <= bytes.endIndex else { return nil }
        var length = 0
        for k in 0..<lengthSize { length = length << 8 | Int(bytes[at + k]) }
        at += lengthSize
        guard length > 0, at + length <= bytes.endIndex else {
            at = bytes.endIndex
            return nil
        }
        defer { at += length }
        return bytes[at..<at + length]
    }
}

extension LengthPrefixedUnits where Bytes == UnsafeBufferPointer<UInt8> {
    /// The units of a packet's payload.
    package init(_ packet: UnsafePointer<AVPacket>, lengthSize: Int) {
        self.init(UnsafeBufferPointer(start: packet.pointee.data, count: packet.pointee.data == nil ? 0 : Int(packet.pointee.size)), lengthSize: lengthSize)
    }
}
