import AVGraph
import CFFmpeg
import Foundation
import Synchronization

/// Whether the producer behind a live source's media is still there. A gap is held (the last
/// picture repeated by `fps`, silence from `mixer`) only while it may come back: once its source
/// knows it left (a socket producer disconnected, a publisher's stream ended) the padding stops
/// at the end of its last media, and resumes, filling the gap, only when media after it
/// arrives. So a run that ends without the producer returning ends where its media ended.
/// Frames carry their source's presence through AVFrame's `opaque_ref`, which FFmpeg copies
/// with a frame's properties (`ref()`, `copyProperties`), so nodes in between need not know.
final class ProducerPresence: Sendable {
    private let end = Mutex<Double?>(nil)
    /// One buffer reference the frames share, by address; it keeps this object alive while a frame holds it.
    private let buffer = Mutex<UInt?>(nil)

    /// What tells our buffers from any other `opaque_ref` (an address, never dereferenced).
    private static let marker = UInt(bitPattern: UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1))

    /// Output-timeline seconds where the media of a producer that left ends; nil while present.
    var mediaEnd: Double? { end.withLock { $0 } }

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
        let made = av_buffer_create(me.assumingMemoryBound(to: UInt8.self), 1, { _, data in
            if let data { Unmanaged<ProducerPresence>.fromOpaque(UnsafeRawPointer(data)).release() }
        }, UnsafeMutableRawPointer(bitPattern: Self.marker), 0)
        buffer.withLock { $0 = made.map { UInt(bitPattern: $0) } }
    }

    func left(mediaEnd t: Double) { end.withLock { $0 = t } }
    func returned() { end.withLock { $0 = nil } }

    func tag(_ frame: Frame) {
        guard let address = buffer.withLock({ $0 }), let buffer = UnsafeMutablePointer<AVBufferRef>(bitPattern: address) else { return }
        av_buffer_replace(&frame.av.pointee.opaque_ref, buffer)
    }

    /// Drops the source's reference (it is done); frames still out keep the object alive.
    func release() {
        guard let address = buffer.withLock({ b in defer { b = nil }; return b }) else { return }
        var ref = UnsafeMutablePointer<AVBufferRef>(bitPattern: address)
        av_buffer_unref(&ref)
    }

    static func of(_ frame: Frame) -> ProducerPresence? {
        guard let ref = frame.av.pointee.opaque_ref, let data = ref.pointee.data,
              av_buffer_get_opaque(ref) == UnsafeMutableRawPointer(bitPattern: Self.marker) else { return nil }
        return Unmanaged<ProducerPresence>.fromOpaque(UnsafeRawPointer(data)).takeUnretainedValue()
    }
}
