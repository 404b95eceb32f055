import AVGraph
import CFFmpeg

extension NetworkReader {
    /// Hands `packet` on as a pending frame from the reader's own thread, when that is all the
    /// decoding thread would do with it (pictures and samples on request: bookkeeping, no
    /// decode) and the hub takes the frame without waiting: one thread fewer woken per packet.
    /// Anything else (a packet to decode, a reordered picture, the backlog not empty, the hub
    /// full) goes through the backlog as before, so the reader still never waits on the
    /// pipeline and packets keep their order. Takes the packet's reference when true.
    func handOnPending(_ packet: UnsafeMutablePointer<AVPacket>, pad: Int) -> Bool {
        let handed = backlog.handledByReader(packet, pad: pad) {
            currentSession.withLock { current in
                guard let c = current, c.healthy, let seconds = pendingSeconds(packet, pad: pad, c),
                      hub.takesDecodedNow(pad: pad, seconds: seconds) else { return false }
                decode(packet, pad: pad, c)
                return true
            }
        }
        if handed { av_packet_unref(packet) }
        return handed
    }

    /// The seconds of the pending frame `packet` would make in session `c` (a picture: 0), nil
    /// when it would be decoded.
    private func pendingSeconds(_ packet: UnsafeMutablePointer<AVPacket>, pad: Int, _ c: SessionDecoding) -> Double? {
        if pad == 1 { return c.samplesOnRequest?.pendingSeconds(packet) }
        // A reordered picture ends pending pictures (`pendingPicture`): its run is decoded.
        let inOrder = packet.pointee.pts == packet.pointee.dts && packet.pointee.pts != avg_nopts()
        return c.picturesOnRequest != nil && inOrder ? 0 : nil
    }
}
