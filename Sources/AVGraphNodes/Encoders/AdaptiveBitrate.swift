import AVGraph
import Foundation

/// `h264`'s `adaptive`: the bitrate follows the narrowest uplink among the live sinks the encoder
/// feeds. Down at once when a sink's backlog passes `congested` seconds (to what its link was
/// seen to carry, less a margin so the backlog drains), then every half second while its
/// backlog still grows; up in steps of `stepShare` of the ceiling, one a second after a clear
/// second, so the ceiling's 90 % comes back within about 7 s of the link clearing (OBS climbs
/// 10 % every 4 s, about 25 s from the floor; HaishinKit 10 % after 15 good seconds).
/// Never below `floor`, never above `ceiling`.
package struct AdaptiveBitrate {
    package struct Change: Equatable {
        package var from: Int
        package var to: Int
        package var reason: String
    }

    /// Seconds of media waiting to leave at which a link counts as congested (OBS acts at 0.2 s).
    static let congested = 0.25
    /// A link under this backlog keeps up.
    static let clear = 0.1
    /// Of the measured carrying rate, what is aimed at: room for the backlog to drain.
    static let margin = 0.85
    static let drainingMargin = 0.7
    static let stepShare = 0.25
    /// Seconds between cuts while a link's backlog still grows: half the encoder's VBV buffer.
    static let cutInterval = 0.5

    package private(set) var ceiling: Int
    package let floor: Int
    package private(set) var current: Int
    private var lastDecrease = -Double.infinity
    /// The worst backlog when the bitrate last went down: while it drains, the cut is working.
    private var backlogAtDecrease = 0.0
    private var lastIncrease = -Double.infinity
    private var clearSince: Double?
    /// What a congested link was last seen to carry: the climb probes just past it before it trusts the link again.
    private var knownLimit: (bits: Int, at: Double)?
    /// Since when the bitrate has stood clear at the probe past `knownLimit`.
    private var probeClearSince: Double?
    static let probeShare = 1.1
    static let probeHold = 2.0
    /// Cuts less than this apart belong to one bout of congestion.
    static let boutGap = 5.0

    package init(ceiling: Int, floor: Int) {
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        current = ceiling
    }

    /// A manual change (`ctl set video.bitrate`): the new ceiling, applied at once and kept.
    package mutating func setCeiling(_ bits: Int) {
        ceiling = max(bits, floor)
        current = ceiling
        knownLimit = nil
        probeClearSince = nil
    }

    /// The next bitrate, if it changes, from the sinks' latest readings.
    package mutating func update(_ readings: [UplinkFeedback.Reading], now: Double) -> Change? {
        let congestedLinks = readings.filter { $0.backlog > Self.congested }
        if let worst = congestedLinks.first {
            clearSince = nil
            guard now - lastDecrease >= Self.cutInterval else { return nil }
            // Not growing since the last cut (the link carries what is sent now): wait, or the
            // bitrate would keep falling below what the link carries while the old backlog goes.
            if worst.backlog <= backlogAtDecrease {
                backlogAtDecrease = worst.backlog
                return nil
            }
            let carried = congestedLinks.compactMap(\.carries).min()
            let margin = worst.backlog > 1 ? Self.drainingMargin : Self.margin
            // Below what the link carries, never just below what is sent now: the last cut takes a
            // second to leave the encoder, and meanwhile the backlog still grows.
            let target = carried.map { Int(Double($0) * margin) } ?? Int(Double(current) * Self.drainingMargin)
            guard target < current else { return nil }
            if let carried {
                // The most the link carried in this bout of congestion: a reading taken while a
                // backlog drains after losses says less than the link holds.
                let sameBout = knownLimit.map { now - $0.at < Self.boutGap } ?? false
                knownLimit = (sameBout ? max(carried, knownLimit!.bits) : carried, now)
            }
            probeClearSince = nil
            backlogAtDecrease = worst.backlog
            let reason = String(format: "%@: %.2f s queued", worst.destination, worst.backlog)
                + (carried.map { String(format: ", the link carries %.2f Mbit/s of video", Double($0) / 1e6) } ?? "")
            return change(to: target, reason: reason, now: now, down: true)
        }
        guard readings.allSatisfy({ $0.backlog < Self.clear }) else {
            clearSince = nil
            probeClearSince = nil
            return nil
        }
        clearSince = clearSince ?? now
        guard current < ceiling, let since = clearSince, now - since >= 1, now - lastIncrease >= 1, now - lastDecrease >= 2 else { return nil }
        var target = current + Int(Double(ceiling) * Self.stepShare)
        if let limit = knownLimit {
            let probe = Int(Double(limit.bits) * Self.probeShare)
            if current >= probe, let above = probeClearSince, now - above >= Self.probeHold {
                knownLimit = nil // it carried a tenth more than the limit seen, for long enough: the link has widened
                probeClearSince = nil
            } else {
                // Just past the limit, then held there: a link still as narrow backs up within a
                // few seconds, and from a tenth over that is a small backlog, not a second spike.
                if current >= probe { probeClearSince = probeClearSince ?? now }
                target = min(target, probe)
            }
        }
        let reason = readings.isEmpty ? "no live sink measured a limit" : "links clear for \(Int(now - since)) s"
        return change(to: target, reason: reason, now: now, down: false)
    }

    private mutating func change(to target: Int, reason: String, now: Double, down: Bool) -> Change? {
        let bits = min(ceiling, max(floor, target))
        guard bits != current else { return nil }
        defer { current = bits }
        if down { lastDecrease = now } else { lastIncrease = now }
        return Change(from: current, to: bits, reason: reason)
    }
}
