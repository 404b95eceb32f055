import AVGraph
import CFFmpeg
import Foundation

/// Whether the producer behind a live source's media is still there. A gap is held (the last
/// picture repeated by `fps`, silence from `mixer`) only while it may come back: once its source
/// knows it left (a socket producer disconnected, a publisher's stream ended) the padding stops
/// at the end of its last media, and resumes, filling the gap, only when media after it
/// arrives. So a run that ends without the producer returning ends where its media ended.
/// Frames carry their source's presence through AVFrame's `opaque_ref`, which FFmpeg copies
/// with a frame's properties (`ref()`, `copyProperties`), so nodes in between need not know.
final class ProducerPresence: @unchecked Sendable {
    private let lock = NSLock()
    private var end: Double?
    /// One buffer reference the frames share; it keeps this object alive while a frame holds it.
    private var buffer: UnsafeMutablePointer<AVBufferRef>?

    /// What tells our buffers from any other `opaque_ref`.
    nonisolated(unsafe) private static let marker = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

    /// Output-timeline seconds where the media of a producer that left ends; nil while present.
    var mediaEnd: Double? { lock.lock(); defer { lock.unlock() }; return end }

    /// How far behind the clock the producer's audio may be, while it is there, before a mixer
    /// fills it with silence. 0 for a producer beside the run (a socket, the app); a network
    /// publisher's audio comes in bursts behind its pictures (MPEG-TS packs 150-500 ms of it
    /// in one PES packet; a sender flushes its buffer 32 KB at a time), and silence put in
    /// before a burst arrives would cut the burst's start (a beep 12-37 ms late, or gone).
    let audioLag: Double
    /// How long after its last media the source takes a connected producer that sends nothing
    /// as silent (0: only once it leaves). A node that repeats through a stall waits that much
    /// longer, or its repeats would run ahead of the mark that stops them.
    let silenceMark: Double

    init(audioLag: Double = 0, silenceMark: Double = 0) {
        self.audioLag = audioLag
        self.silenceMark = silenceMark
        let me = Unmanaged.passRetained(self).toOpaque()
        buffer = av_buffer_create(me.assumingMemoryBound(to: UInt8.self), 1, { _, data in
            if let data { Unmanaged<ProducerPresence>.fromOpaque(UnsafeRawPointer(data)).release() }
        }, Self.marker, 0)
    }

    func left(mediaEnd t: Double) { lock.lock(); end = t; lock.unlock() }
    func returned() { lock.lock(); end = nil; lock.unlock() }

    func tag(_ frame: Frame) {
        guard let buffer else { return }
        av_buffer_replace(&frame.av.pointee.opaque_ref, buffer)
    }

    /// Drops the source's reference (it is done); frames still out keep the object alive.
    func release() {
        av_buffer_unref(&buffer)
    }

    static func of(_ frame: Frame) -> ProducerPresence? {
        guard let ref = frame.av.pointee.opaque_ref, let data = ref.pointee.data,
              av_buffer_get_opaque(ref) == Self.marker else { return nil }
        return Unmanaged<ProducerPresence>.fromOpaque(UnsafeRawPointer(data)).takeUnretainedValue()
    }
}
