/// One WebRTC publisher's streams on one timeline, so that a flash and its beep stay together:
/// each stream's RTP clock is tied to the sender's wallclock by its RTCP sender reports (RFC
/// 3550 6.4.1), which is what the streams share. A sender's first report can come seconds
/// after its first media (libwebrtc's audio: up to 2.5 s), so media is held until every stream
/// that has sent has also reported, at most `hold` seconds; a stream without a report by then
/// is placed by its packets' arrival against the reported ones (or, when none reported, by
/// arrival alone). Once placed a stream is not moved again: a jump would cut the recording.
/// Sans-IO: media and reports in with their arrival times, media out with its time in seconds
/// from the publisher's first media.
package struct RtpLipSync<Payload> {
    package struct Released {
        package var track: Int
        package var seconds: Double
        package var payload: Payload
    }

    private struct Track {
        let rate: Double
        var ssrc: UInt32?
        var lastTimestamp: UInt32?
        var extended: Int64 = 0
        /// Media seconds of the sender's wallclock = extended / rate + offset.
        var offset: Double?
        var placedBySenderReport = false
    }

    private struct Held {
        var track: Int
        var extended: Int64
        var arrival: Double
        var payload: Payload
    }

    package let hold: Double
    private var tracks: [Track]
    private var reports: [UInt32: (ntp: Double, timestamp: UInt32)] = [:]
    private var held: [Held] = []
    private var firstArrival: Double?
    /// Wallclock minus arrival, the largest seen on reported streams (the least delayed packet):
    /// how arrival times are read on the sender's wallclock.
    private var wallclockMinusArrival: Double?
    /// The wallclock second that is 0 on the timeline; nil until media is released.
    private var epoch: Double?
    /// Whether the timeline is the sender's wallclock (some stream reported before release) or arrival.
    private var onWallclock = false
    /// Whether a stream with no media yet still holds release back (video waits for its keyframe).
    private var waiting: Set<Int> = []

    /// `rates`: each track's RTP clock rate (90000 for video, 48000 for Opus).
    package init(rates: [Int], hold: Double = 3) {
        tracks = rates.map { Track(rate: Double($0)) }
        self.hold = hold
    }

    package var isReleasing: Bool { epoch != nil }
    /// When the media at time 0 arrived (set at the first release).
    package private(set) var epochArrival: Double?

    /// Holds release until `track` has media, within the hold (video waits for its first keyframe).
    package mutating func awaitMedia(on track: Int) { waiting.insert(track) }

    package mutating func senderReport(_ report: RtcpReports.SenderReport) {
        reports[report.ssrc] = (report.ntpSeconds, report.rtpTimestamp)
        for i in tracks.indices where tracks[i].ssrc == report.ssrc && tracks[i].offset == nil { place(i, by: report.ntpSeconds, report.rtpTimestamp) }
    }

    /// A unit of media (a picture, an audio packet) of `track` with its RTP timestamp.
    package mutating func push(track: Int, ssrc: UInt32, timestamp: UInt32, arrival: Double, payload: Payload) -> [Released] {
        guard tracks.indices.contains(track) else { return [] }
        waiting.remove(track)
        if tracks[track].ssrc != ssrc {
            // A new source on the track (a sender restarting it): its clock starts over.
            tracks[track] = Track(rate: tracks[track].rate, ssrc: ssrc)
            // After release a report places it only on a timeline that is the sender's wallclock.
            if let r = reports[ssrc], epoch == nil || onWallclock { place(track, by: r.ntp, r.timestamp) }
        }
        let extended = extend(track, timestamp)
        firstArrival = firstArrival ?? arrival
        if let offset = tracks[track].offset, tracks[track].placedBySenderReport {
            let skew = Double(extended) / tracks[track].rate + offset - arrival
            wallclockMinusArrival = max(wallclockMinusArrival ?? skew, skew)
        }
        held.append(Held(track: track, extended: extended, arrival: arrival, payload: payload))
        return release(now: arrival)
    }

    /// Media released because the hold ran out (call on a timer too).
    package mutating func release(now: Double) -> [Released] {
        guard let first = firstArrival, !held.isEmpty else { return [] }
        if epoch == nil {
            let seen = Set(held.map(\.track))
            let reported = seen.allSatisfy { tracks[$0].offset != nil }
            guard (reported && waiting.isEmpty) || now - first >= hold else { return [] }
            for h in held where tracks[h.track].placedBySenderReport {
                let skew = Double(h.extended) / tracks[h.track].rate + tracks[h.track].offset! - h.arrival
                wallclockMinusArrival = max(wallclockMinusArrival ?? skew, skew)
            }
            onWallclock = wallclockMinusArrival != nil
            for t in seen where tracks[t].offset == nil { placeByArrival(t) }
            let first = held.min { placed($0) < placed($1) }!
            epoch = placed(first)
            epochArrival = first.arrival
        }
        var out: [Released] = []
        for h in held {
            if tracks[h.track].offset == nil { placeByArrival(h.track, arrival: h.arrival, extended: h.extended) }
            let seconds = Double(h.extended) / tracks[h.track].rate + tracks[h.track].offset! - epoch!
            if seconds >= 0 { out.append(Released(track: h.track, seconds: seconds, payload: h.payload)) }
        }
        held.removeAll(keepingCapacity: true)
        return out
    }

    private func placed(_ h: Held) -> Double { Double(h.extended) / tracks[h.track].rate + tracks[h.track].offset! }

    private mutating func place(_ track: Int, by ntp: Double, _ timestamp: UInt32) {
        // The report's timestamp extended near the stream's own (they are seconds apart at most).
        let reference = tracks[track].lastTimestamp.map { tracks[track].extended + Int64(Int32(bitPattern: timestamp &- $0)) } ?? Int64(timestamp)
        tracks[track].offset = ntp - Double(reference) / tracks[track].rate
        tracks[track].placedBySenderReport = true
    }

    /// A stream without a report: its first held (or this) packet is placed where its arrival
    /// reads on the reported streams' wallclock.
    private mutating func placeByArrival(_ track: Int, arrival: Double? = nil, extended: Int64? = nil) {
        let first = held.first { $0.track == track }
        guard let arrival = arrival ?? first?.arrival, let extended = extended ?? first?.extended else { return }
        tracks[track].offset = arrival + (wallclockMinusArrival ?? 0) - Double(extended) / tracks[track].rate
    }

    private mutating func extend(_ track: Int, _ timestamp: UInt32) -> Int64 {
        if let last = tracks[track].lastTimestamp {
            tracks[track].extended += Int64(Int32(bitPattern: timestamp &- last))
        } else {
            tracks[track].extended = Int64(timestamp)
        }
        tracks[track].lastTimestamp = timestamp
        return tracks[track].extended
    }
}
