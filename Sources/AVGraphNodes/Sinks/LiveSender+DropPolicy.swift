import AVGraph
import Foundation

/// What a live sink drops when its link cannot keep up, decided under `LiveSender.shared`.
extension LiveSender.Shared {
    /// `buffer`, but at most `adaptiveBuffer` when an adaptive encoder feeds the sink: its viewers
    /// are promised a delay that stays short while the bitrate comes down, so a backlog past it
    /// gives way at once (a run of pictures to the next keyframe) instead of arriving late.
    func limit(buffer: Double) -> Int64 {
        let adaptive = streams.contains { $0?.uplink != nil }
        return Int64((adaptive ? min(buffer, LiveSender.adaptiveBuffer) : buffer) * 1e6)
    }

    /// Media time from the oldest queued packet of one kind to the newest packet of any kind.
    func span(video: Bool) -> Int64 {
        guard let oldest = queue.first(where: { $0.isVideo == video }) else { return 0 }
        return newest - oldest.packet.time
    }

    /// Video goes first, a whole run up to the next keyframe at a time; audio is kept twice as
    /// long, because it is cheap (128 kbit/s: 2 s is 32 kB) and a gap in it is what people notice.
    /// Over the pipeline's memory limit (whoever filled it) the video kept shrinks to a quarter of
    /// `buffer`: a backlog gives way, but a network that keeps up loses nothing.
    mutating func enforceLimits(buffer: Double, overMemoryLimit: Bool) {
        let limit = limit(buffer: buffer)
        let videoLimit = overMemoryLimit ? limit / 4 : limit
        while span(video: true) > videoLimit { dropVideoToNextKeyframe() }
        while span(video: false) > 2 * limit { dropOldestAudio() }
    }

    /// Drops the oldest queued video packet and every video packet after it up to (not
    /// including) the next keyframe; when no keyframe is queued, all video, and what arrives
    /// next waits for one.
    mutating func dropVideoToNextKeyframe() {
        guard let first = queue.firstIndex(where: \.isVideo) else { return }
        var next: Int?
        for i in queue.indices where i > first && queue[i].isVideo && queue[i].packet.isKeyframe {
            next = i
            break
        }
        let end = next ?? queue.count
        let before = queue.count
        var bytes = 0
        var kept: [LiveSender.Item] = []
        kept.reserveCapacity(queue.count)
        for (i, item) in queue.enumerated() {
            if item.isVideo && i >= first && i < end { bytes += item.packet.byteCount } else { kept.append(item) }
        }
        queue = kept
        queuedBytes -= bytes
        droppedVideo += before - kept.count
        if next == nil { videoWaitsForKeyframe = true }
    }

    mutating func dropOldestAudio() {
        guard let i = queue.firstIndex(where: { !$0.isVideo }) else { return }
        queuedBytes -= queue[i].packet.byteCount
        queue.remove(at: i)
        droppedAudio += 1
    }

    /// A new session starts on a video keyframe: video before it goes, and audio older than it.
    /// False while no keyframe is queued yet (the session waits for one).
    mutating func trimToKeyframe(isVideoInput: [Bool]) -> Bool {
        let videoExpected = isVideoInput.indices.contains { isVideoInput[$0] && streams[$0] != nil && !ended[$0] }
        guard videoExpected || queue.contains(where: \.isVideo) else { return true }
        guard let k = queue.firstIndex(where: { $0.isVideo && $0.packet.isKeyframe }) else {
            let before = queue.count
            queuedBytes -= queue.filter(\.isVideo).reduce(0) { $0 + $1.packet.byteCount }
            queue.removeAll(where: \.isVideo)
            droppedVideo += before - queue.count
            if before != queue.count { videoWaitsForKeyframe = true }
            return false
        }
        // Audio a little ahead of the keyframe stays: the encoder's priming packet starts a few
        // milliseconds early, and players start audio and video together anyway.
        let start = queue[k].packet.time - 50_000
        var kept: [LiveSender.Item] = []
        for (i, item) in queue.enumerated() {
            if i < k && (item.isVideo || item.packet.time < start) {
                queuedBytes -= item.packet.byteCount
                if item.isVideo { droppedVideo += 1 } else { droppedAudio += 1 }
            } else {
                kept.append(item)
            }
        }
        // Queued in arrival order, audio can sit before the keyframe with a later time (the video
        // encoder's delay is longer). FLV takes the session's first packet as its time origin and
        // refuses anything earlier (EINVAL, a disconnect at once), so the session opens in time order.
        queue = kept.enumerated().sorted { a, b in
            a.element.packet.time != b.element.packet.time ? a.element.packet.time < b.element.packet.time : a.offset < b.offset
        }.map(\.element)
        return true
    }
}
