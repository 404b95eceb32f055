import CFFmpeg

/// An AVIOContext whose bytes go to a Swift closure: a muxer writing into a connection avgraph
/// holds itself. Each call gets at most `bufferSize` bytes (the buffer is written out when full
/// or flushed), so a buffer of one network message makes every call one message. `write`
/// returns 0 or a negative AVERROR, which libavformat keeps as the context's error: the muxer's
/// next call fails with it.
final class WriteCallbackIO {
    typealias Write = (UnsafeRawBufferPointer) -> Int32
    private let write: Write
    private(set) var context: UnsafeMutablePointer<AVIOContext>?

    init(bufferSize: Int, write: @escaping Write) throws {
        self.write = write
        guard let buffer = av_malloc(bufferSize) else { throw MediaError("out of memory (av_malloc)") }
        context = avio_alloc_context(buffer.assumingMemoryBound(to: UInt8.self), Int32(bufferSize), 1,
                                     Unmanaged.passUnretained(self).toOpaque(), nil, { opaque, buf, size in
            guard let opaque, let buf else { return avg_averror(EINVAL) }
            let io = Unmanaged<WriteCallbackIO>.fromOpaque(opaque).takeUnretainedValue()
            let result = io.write(UnsafeRawBufferPointer(start: buf, count: Int(size)))
            return result < 0 ? result : size
        }, nil)
        guard let context else {
            var b: UnsafeMutableRawPointer? = buffer
            av_freep(&b)
            throw MediaError("out of memory (avio_alloc_context)")
        }
        // Never a write larger than one message, whatever size the muxer hands over.
        context.pointee.max_packet_size = Int32(bufferSize)
    }

    deinit {
        guard let c = context else { return }
        av_freep(&c.pointee.buffer)
        avio_context_free(&context)
    }
}
