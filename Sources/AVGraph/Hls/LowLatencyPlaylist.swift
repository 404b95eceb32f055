import Foundation

/// One rendition of a low-latency HLS presentation as its media playlist says it (RFC 8216bis):
/// what the writer has published so far, without bytes. Rendering is a pure function of it.
public struct LowLatencyPlaylist: Sendable {
    public struct Part: Sendable {
        public var duration: Double
        public var independent: Bool
        public init(duration: Double, independent: Bool) { (self.duration, self.independent) = (duration, independent) }
    }

    public struct Segment: Sendable {
        public var msn: Int
        /// When its first picture was taken, on the wall clock (EXT-X-PROGRAM-DATE-TIME).
        public var date: Date
        /// Complete parts, in order.
        public var parts: [Part] = []
        /// Set once the segment is complete (EXTINF).
        public var duration: Double?
        public init(msn: Int, date: Date) { (self.msn, self.date) = (msn, date) }
    }

    public var name: String
    public var targetDuration: Int
    public var partTarget: Double
    /// nil: every segment is kept (an EVENT playlist).
    public var window: Int?
    public var segments: [Segment] = []
    public var ended = false
    /// The other renditions' folder names, for EXT-X-RENDITION-REPORT.
    public var others: [String] = []

    public init(name: String, targetDuration: Int, partTarget: Double, window: Int?) {
        (self.name, self.targetDuration, self.partTarget, self.window) = (name, targetDuration, partTarget, window)
    }

    public static func segmentURI(_ msn: Int) -> String { String(format: "seg_%05d.m4s", msn) }
    public static func partURI(_ msn: Int, _ part: Int) -> String { String(format: "seg_%05d.p%d.m4s", msn, part) }

    /// Partial segments stay listed for this long behind the live edge (the specification: at least
    /// three target durations).
    public var partSpan: Double { 3 * Double(targetDuration) }
    /// Delta updates may skip segments older than this behind the edge (at least six target durations).
    public var skipBoundary: Double { 6 * Double(targetDuration) }
    /// Where a player following parts starts behind the edge: three parts (at least two).
    public var partHoldBack: Double { 3 * partTarget }

    /// The newest complete part: (media sequence, index), nil before the first.
    public var lastPart: (msn: Int, part: Int)? {
        for s in segments.reversed() where !s.parts.isEmpty { return (s.msn, s.parts.count - 1) }
        return nil
    }

    /// The newest complete segment's media sequence number.
    public var lastCompleteSegment: Int? { segments.last { $0.duration != nil }?.msn }

    /// The segment being written (or the next to come): a request beyond it by more than two is refused.
    public var edgeSegment: Int { segments.last?.msn ?? 0 }

    /// Whether `_HLS_msn=msn` (with `_HLS_part=part`) is in the playlist (RFC 8216bis 6.2.5.2).
    public func contains(msn: Int, part: Int?) -> Bool {
        if ended { return true }
        guard let part else { return (lastCompleteSegment ?? -1) >= msn }
        guard let last = lastPart else { return false }
        return last.msn > msn || (last.msn == msn && last.part >= part)
    }

    /// The media playlist text; `skip` asks for a delta update (`_HLS_skip=YES`).
    public func render(skip: Bool, reports: [String: (msn: Int, part: Int)]) -> String {
        var text = "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:\(targetDuration)\n"
        text += "#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=\(Self.decimal(skipBoundary)),PART-HOLD-BACK=\(Self.decimal(partHoldBack))\n"
        text += "#EXT-X-PART-INF:PART-TARGET=\(Self.decimal(partTarget))\n"
        text += "#EXT-X-MEDIA-SEQUENCE:\(segments.first?.msn ?? 0)\n"
        if window == nil { text += "#EXT-X-PLAYLIST-TYPE:EVENT\n" }
        text += "#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-MAP:URI=\"init.mp4\"\n"
        // Where the listing ends on the media timeline, counted back for parts and skips.
        let total = segments.reduce(0.0) { $0 + ($1.duration ?? $1.parts.reduce(0) { $0 + $1.duration }) }
        var elapsed = 0.0
        var skipped = 0
        if skip {
            for s in segments {
                guard let d = s.duration, total - elapsed - d >= skipBoundary else { break }
                elapsed += d
                skipped += 1
            }
            if skipped > 0 { text += "#EXT-X-SKIP:SKIPPED-SEGMENTS=\(skipped)\n" }
        }
        for s in segments.dropFirst(skipped) where s.duration != nil || !s.parts.isEmpty {
            let length = s.duration ?? s.parts.reduce(0) { $0 + $1.duration }
            text += "#EXT-X-PROGRAM-DATE-TIME:\(Self.date(s.date))\n"
            if total - elapsed - length < partSpan || s.duration == nil {
                for (i, p) in s.parts.enumerated() {
                    text += "#EXT-X-PART:DURATION=\(Self.decimal(p.duration)),URI=\"\(Self.partURI(s.msn, i))\"\(p.independent ? ",INDEPENDENT=YES" : "")\n"
                }
            }
            if let d = s.duration { text += "#EXTINF:\(Self.decimal(d)),\n\(Self.segmentURI(s.msn))\n" }
            elapsed += length
        }
        if ended {
            text += "#EXT-X-ENDLIST\n"
        } else if let current = segments.last {
            let next = current.duration == nil ? (current.msn, current.parts.count) : (current.msn + 1, 0)
            text += "#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"\(Self.partURI(next.0, next.1))\"\n"
        }
        for other in others {
            guard let r = reports[other] else { continue }
            text += "#EXT-X-RENDITION-REPORT:URI=\"../\(other)/index.m3u8\",LAST-MSN=\(r.msn),LAST-PART=\(r.part)\n"
        }
        return text
    }

    /// The classic playlist written beside the segments on disk: complete segments only, what a
    /// static web server serves and a crash leaves.
    public func renderClassic() -> String {
        var text = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:\(targetDuration)\n"
        let complete = segments.filter { $0.duration != nil }
        text += "#EXT-X-MEDIA-SEQUENCE:\(complete.first?.msn ?? 0)\n"
        if window == nil { text += "#EXT-X-PLAYLIST-TYPE:EVENT\n" }
        text += "#EXT-X-INDEPENDENT-SEGMENTS\n#EXT-X-MAP:URI=\"init.mp4\"\n"
        for s in complete {
            text += "#EXT-X-PROGRAM-DATE-TIME:\(Self.date(s.date))\n#EXTINF:\(Self.decimal(s.duration ?? 0)),\n\(Self.segmentURI(s.msn))\n"
        }
        if ended { text += "#EXT-X-ENDLIST\n" }
        return text
    }

    static func decimal(_ value: Double) -> String { String(format: "%.5f", value) }

    static func date(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }
}
