import CFFmpeg

/// An AVIOContext whose bytes come from a Swift closure: a stream avgraph receives itself (its
/// own RTMP server) read by one of libavformat's demuxers. `read` fills the buffer and returns
/// the byte count, 0 at the end, negative on failure; it may block.
final class ReadCallbackIO {
    typealias Read = (UnsafeMutableRawBufferPointer) -> Int
    private let read: Read
    private(set) var context: UnsafeMutablePointer<AVIOContext>?

    init(bufferSize: Int = 64 * 1024, read: @escaping Read) throws {
        self.read = read
        guard let buffer = av_malloc(bufferSize) else { throw MediaError("out of memory (av_malloc)") }
        context = avio_alloc_context(buffer.assumingMemoryBound(to: UInt8.self), Int32(bufferSize), 0,
                                     Unmanaged.passUnretained(self).toOpaque(), { opaque, buf, size in
            guard let opaque, let buf else { return avg_error_eof() }
            let io = Unmanaged<ReadCallbackIO>.fromOpaque(opaque).takeUnretainedValue()
            let n = io.read(UnsafeMutableRawBufferPointer(start: buf, count: Int(size)))
            return n > 0 ? Int32(n) : n == 0 ? avg_error_eof() : avg_averror(EIO)
        }, nil, nil)
        if context == nil {
            var b: UnsafeMutableRawPointer? = buffer
            av_freep(&b)
            throw MediaError("out of memory (avio_alloc_context)")
        }
    }

    deinit {
        guard let c = context else { return }
        // libavformat may have swapped the buffer for its own: free the one it holds now.
        av_freep(&c.pointee.buffer)
        avio_context_free(&context)
    }
}
