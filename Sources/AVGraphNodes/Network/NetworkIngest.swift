import AVGraph
import Foundation

extension IngestHub {
    /// Queues a decoded frame from a network reader (pad 0 video, 1 audio). A full queue makes
    /// the reader wait a little (TCP or SRT hold the stream meanwhile) before the drop policy
    /// applies: a short stall of the pipeline costs nothing, only a lasting one drops.
    func pushDecoded(_ frame: Frame, pad: Int, time: Double, sent: Double, session: Int, cancel: CancelFlag) {
        let seconds = IngestQueue.seconds(frame)
        let deadline = Monotonic.now + 1
        // Woken by the node taking an item, the queue ending, or a wake (the reader stopping).
        while !queue.handOff.waitForRoom(lane: pad == 0 ? 0 : 1, cost: pad == 0 ? 1 : seconds, until: deadline),
              queue.handOff.isOpen, Monotonic.now < deadline, !cancel.isCancelled {}
        if pad != 0 && !queue.hasRoomForAudio(seconds: seconds) { queue.noteDropped(pad: pad); return }
        if pad == 0 { frame.privacy = privacy.mark(at: time) }
        _ = queue.push(IngestQueue.Item(pad: pad, frame: frame, sourceTime: time, arrival: sent, session: session))
    }

    /// Whether `pushDecoded` would queue a frame (a picture, or `seconds` of audio) without waiting.
    func takesDecodedNow(pad: Int, seconds: Double) -> Bool {
        queue.handOff.waitForRoom(lane: pad == 0 ? 0 : 1, cost: pad == 0 ? 1 : seconds, until: 0)
    }
}
