import Dispatch
import Foundation
import Synchronization

/// A low-latency HLS presentation as its server sees it: what the `hls` sink's writer has
/// published (init segments, the parts and segments of each rendition, its playlist) and the
/// requests waiting for what is not there yet. The writer publishes from its node's thread; the
/// server asks from its own (`answer`), and nobody's thread waits: a blocked playlist reload, or
/// a part asked for before it began, is a waiter answered when the writer publishes what it waits
/// for, or with 503 after three target durations; a part being written goes out chunk by chunk
/// as the writer cuts them (a CMAF chunk per picture).
// @unchecked: every stored property is immutable or under `state`'s lock; the timer is only
// started and cancelled.
public final class LowLatencyPresentation: @unchecked Sendable {
    public struct Shape: Sendable {
        /// The master playlist's file name (`master.m3u8`).
        public var master: String
        public var renditions: [String]
        public var targetDuration: Int
        public var partTarget: Double
        public var window: Int?
        /// The presentation's folder on disk: segments no longer in memory are read from there.
        public var folder: String
        public init(master: String, renditions: [String], targetDuration: Int, partTarget: Double, window: Int?, folder: String) {
            (self.master, self.renditions, self.targetDuration, self.partTarget, self.window, self.folder) =
                (master, renditions, targetDuration, partTarget, window, folder)
        }
    }

    public typealias Response = WebEndpoints.Response
    public typealias Deliver = @Sendable (Response) -> Void

    /// A part's body being written to one client.
    private final class PartStream {
        let writer: any WebBodyWriter
        let msn: Int, part: Int
        init(writer: any WebBodyWriter, msn: Int, part: Int) { (self.writer, self.msn, self.part) = (writer, msn, part) }
    }

    private struct Waiter {
        enum Kind {
            case master
            case playlist(msn: Int, part: Int?, skip: Bool)
            case segment(msn: Int)
            case part(msn: Int, part: Int)
        }
        let rendition: Int
        let kind: Kind
        let deadline: DispatchTime
        let deliver: Deliver
    }

    private struct Rendition {
        var playlist: LowLatencyPlaylist
        var initSegment: [UInt8]?
        /// Complete parts' bytes by media sequence number, for the segments whose parts are listed.
        var parts: [Int: [[UInt8]]] = [:]
        /// The part being written: its place and the chunks cut so far.
        var writing: (msn: Int, part: Int, chunks: [[UInt8]])?
        /// Complete segments' bytes kept in memory (the window); older ones are read from disk.
        var segments: [Int: [UInt8]] = [:]
        var streams: [PartStream] = []
        var rendered: [Bool: String] = [:]
    }

    private struct State {
        var renditions: [Rendition]
        var master: String?
        var waiters: [Waiter] = []
        var closed = false
    }

    public let shape: Shape
    private let state: Mutex<State>
    private let timer: DispatchSourceTimer

    public init(_ shape: Shape) {
        self.shape = shape
        let playlists = shape.renditions.map { name in
            var p = LowLatencyPlaylist(name: name, targetDuration: shape.targetDuration, partTarget: shape.partTarget, window: shape.window)
            p.others = shape.renditions.filter { $0 != name }
            return Rendition(playlist: p)
        }
        state = Mutex(State(renditions: playlists))
        timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + .milliseconds(50), repeating: .milliseconds(50))
        timer.setEventHandler { [weak self] in self?.expire() }
        timer.resume()
    }

    deinit { timer.cancel() }

    /// How long a request may wait for what it asks (the specification: three target durations).
    var holdLimit: DispatchTimeInterval { .milliseconds(3000 * shape.targetDuration) }

    // MARK: The writer's side

    public func publish(initSegment: [UInt8], rendition r: Int) {
        change { s in
            s.renditions[r].initSegment = initSegment
            return false
        }
    }

    public func publish(master text: String) {
        change { s in
            s.master = text
            return true
        }
    }

    /// A new segment begins (the part after it is its first).
    public func beginSegment(_ msn: Int, date: Date, rendition r: Int) {
        change { s in
            s.renditions[r].playlist.segments.append(.init(msn: msn, date: date))
            return false
        }
    }

    /// A CMAF chunk of the part being written: the first begins the part.
    public func append(chunk: [UInt8], rendition r: Int) {
        change { s in
            var began = false
            let segment = s.renditions[r].playlist.segments[s.renditions[r].playlist.segments.count - 1]
            if s.renditions[r].writing == nil {
                s.renditions[r].writing = (segment.msn, segment.parts.count, [])
                began = true
            }
            s.renditions[r].writing?.chunks.append(chunk)
            for stream in s.renditions[r].streams { stream.writer.write(chunk) }
            return began
        }
    }

    /// The part being written is complete: `bytes` are its chunks joined. `segment`: it is the
    /// last of its segment, which is complete with it (its duration, its parts joined): one change,
    /// so no playlist ever hints at a part after a segment's last.
    public func completePart(duration: Double, independent: Bool, bytes: [UInt8], segment: (duration: Double, bytes: [UInt8])?, rendition r: Int) {
        change { s in
            guard let writing = s.renditions[r].writing else { return false }
            s.renditions[r].writing = nil
            let last = s.renditions[r].playlist.segments.count - 1
            s.renditions[r].playlist.segments[last].parts.append(.init(duration: duration, independent: independent))
            s.renditions[r].parts[writing.msn, default: []].append(bytes)
            for stream in s.renditions[r].streams { stream.writer.end() }
            s.renditions[r].streams.removeAll()
            if let segment {
                s.renditions[r].playlist.segments[last].duration = segment.duration
                s.renditions[r].segments[writing.msn] = segment.bytes
                // The oldest leaves the window in the same change: no playlist lists one more than the window.
                if let window = shape.window, s.renditions[r].playlist.segments.count(where: { $0.duration != nil }) > window {
                    let gone = s.renditions[r].playlist.segments.removeFirst().msn
                    s.renditions[r].parts[gone] = nil
                }
                Self.trim(&s.renditions[r], keepInMemory: 2 * (shape.window ?? 5) + 1)
            }
            return true
        }
    }

    /// Every playlist ends (#EXT-X-ENDLIST): waiting requests get what there is.
    public func end() {
        change { s in
            for r in s.renditions.indices {
                s.renditions[r].playlist.ended = true
                for stream in s.renditions[r].streams { stream.writer.close() }
                s.renditions[r].streams.removeAll()
            }
            return true
        }
    }

    /// The run stops serving: waiting requests get 503, the timer stops.
    public func close() {
        let waiting = state.withLock { s -> [Waiter] in
            s.closed = true
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        timer.cancel()
        for w in waiting { w.deliver(Self.text(503, "503: the presentation has stopped\n")) }
    }

    /// Rendition `r`'s playlist as published.
    public func playlist(_ r: Int) -> LowLatencyPlaylist { state.withLock { $0.renditions[r].playlist } }

    /// Requests waiting now (a figure for the node's stats).
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// Parts are listed for segments within `partSpan` of the edge and kept a segment longer (a
    /// player may be fetching); segments' bytes stay in memory for the window.
    private static func trim(_ r: inout Rendition, keepInMemory: Int) {
        let segments = r.playlist.segments
        var behind = 0.0
        var keepPartsFrom = segments.last?.msn ?? 0
        for s in segments.reversed() {
            keepPartsFrom = s.msn
            behind += s.duration ?? 0
            if behind > r.playlist.partSpan { break }
        }
        r.parts = r.parts.filter { $0.key >= keepPartsFrom - 1 }
        if let newest = segments.last(where: { $0.duration != nil })?.msn {
            r.segments = r.segments.filter { $0.key > newest - keepInMemory }
        }
    }

    /// Applies a change of the writer's; when it says a waiter may be satisfied now (a part began
    /// or completed, the master came, the end), answers those it satisfies (outside the lock).
    private func change(_ body: (inout State) -> Bool) {
        let ready = state.withLock { s -> [(Deliver, Response)] in
            guard body(&s) else { return [] }
            for r in s.renditions.indices { s.renditions[r].rendered.removeAll() }
            var ready: [(Deliver, Response)] = []
            var still: [Waiter] = []
            for w in s.waiters {
                if let response = resolve(w.kind, rendition: w.rendition, in: &s) { ready.append((w.deliver, response)) } else { still.append(w) }
            }
            s.waiters = still
            return ready
        }
        for (deliver, response) in ready { deliver(response) }
    }

    private func expire() {
        let now = DispatchTime.now()
        let late = state.withLock { s -> [Waiter] in
            var late: [Waiter] = []
            s.waiters.removeAll { w in
                guard w.deadline <= now else { return false }
                late.append(w)
                return true
            }
            return late
        }
        for w in late { w.deliver(Self.text(503, "503: not there within three target durations\n")) }
    }

    // MARK: The server's side

    /// The answer to a request below the presentation's route; `rest` is the path after it
    /// (`720p/index.m3u8`).
    public func answer(method: String, rest: String, query: [String: String]) -> Response {
        if method == "OPTIONS" {
            return Response(status: 204, headers: Self.cors.merging(["Access-Control-Allow-Methods": "GET, HEAD, OPTIONS", "Access-Control-Max-Age": "86400"]) { a, _ in a })
        }
        guard method == "GET" || method == "HEAD" else {
            return Self.text(405, "405: an HLS presentation is read with GET\n", headers: ["Allow": "GET, HEAD, OPTIONS"])
        }
        if rest == shape.master { return hold(.master, rendition: 0) }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let r = shape.renditions.firstIndex(of: String(parts[0])) else {
            return Self.text(404, "404: no such file in this presentation; its master playlist is \(shape.master)\n")
        }
        let file = String(parts[1])
        switch file {
        case "index.m3u8":
            return playlistRequest(r, query: query)
        case "init.mp4":
            guard let bytes = state.withLock({ $0.renditions[r].initSegment }) else { return Self.text(404, "404: not written yet\n") }
            return media(bytes)
        default:
            guard let (msn, part) = Self.mediaName(file) else { return Self.text(404, "404: no such file in this presentation\n") }
            return mediaRequest(r, msn: msn, part: part)
        }
    }

    /// `seg_00012.m4s` is (12, nil); `seg_00012.p3.m4s` is (12, 3).
    public static func mediaName(_ file: String) -> (Int, Int?)? {
        guard file.hasPrefix("seg_"), file.hasSuffix(".m4s") else { return nil }
        let middle = file.dropFirst(4).dropLast(4).split(separator: ".", omittingEmptySubsequences: false)
        guard let msn = Int(middle[0]), msn >= 0, middle[0].allSatisfy(\.isASCII) else { return nil }
        if middle.count == 1 { return (msn, nil) }
        guard middle.count == 2, middle[1].first == "p", let part = Int(middle[1].dropFirst()), part >= 0 else { return nil }
        return (msn, part)
    }

    private func playlistRequest(_ r: Int, query: [String: String]) -> Response {
        let skip = query["_HLS_skip"] == "YES" || query["_HLS_skip"] == "v2"
        let msnText = query["_HLS_msn"], partText = query["_HLS_part"]
        if msnText == nil && partText != nil { return Self.text(400, "400: _HLS_part needs _HLS_msn\n") }
        guard let msnText else { return hold(.playlist(msn: -1, part: nil, skip: skip), rendition: r) }
        guard let msn = Int(msnText), msn >= 0 else { return Self.text(400, "400: _HLS_msn is not a media sequence number\n") }
        var part: Int?
        if let partText {
            guard let p = Int(partText), p >= 0 else { return Self.text(400, "400: _HLS_part is not a part index\n") }
            part = p
        }
        let edge = state.withLock { $0.renditions[r].playlist.edgeSegment }
        if msn > edge + 2 { return Self.text(400, "400: _HLS_msn \(msn) is more than two segments past the playlist's last (\(edge))\n") }
        return hold(.playlist(msn: msn, part: part, skip: skip), rendition: r)
    }

    private func mediaRequest(_ r: Int, msn: Int, part: Int?) -> Response {
        let (edge, first) = state.withLock { s in (s.renditions[r].playlist.edgeSegment, s.renditions[r].playlist.segments.first?.msn ?? 0) }
        if msn > edge + 2 { return Self.text(400, "400: segment \(msn) is more than two past the playlist's last (\(edge))\n") }
        let maxParts = Int((Double(shape.targetDuration) / shape.partTarget).rounded(.up)) + 2
        if let part, part >= maxParts { return Self.text(400, "400: a segment here has at most \(maxParts) parts\n") }
        if let part {
            if msn < first { return Self.text(404, "404: segment \(msn) has left the window, and its parts\n") }
            return hold(.part(msn: msn, part: part), rendition: r)
        }
        return hold(.segment(msn: msn), rendition: r)
    }

    /// The answer now when there is one, else a waiter answered when the writer publishes it.
    private func hold(_ kind: Waiter.Kind, rendition r: Int) -> Response {
        let now = state.withLock { s -> Response? in
            if let response = resolve(kind, rendition: r, in: &s) { return response }
            if s.closed { return Self.text(503, "503: the presentation has stopped\n") }
            return nil
        }
        if let now { return now }
        let deadline = DispatchTime.now() + holdLimit
        return .later { [weak self] deliver in
            guard let self else { return deliver(Self.text(503, "503: the presentation has stopped\n")) }
            // Published meanwhile: answered now; else it waits its turn.
            let response = self.state.withLock { s -> Response? in
                if let response = self.resolve(kind, rendition: r, in: &s) { return response }
                s.waiters.append(Waiter(rendition: r, kind: kind, deadline: deadline, deliver: deliver))
                return nil
            }
            if let response { deliver(response) }
        }
    }

    /// What answers `kind` now, nil while it must wait. Under the lock.
    private func resolve(_ kind: Waiter.Kind, rendition r: Int, in s: inout State) -> Response? {
        let rendition = s.renditions[r]
        switch kind {
        case .master:
            return s.master.map { Self.playlist($0, maxAge: 60) }
        case .playlist(let msn, let part, let skip):
            guard msn < 0 ? !rendition.playlist.segments.isEmpty : rendition.playlist.contains(msn: msn, part: part) else { return nil }
            let text: String
            if let cached = rendition.rendered[skip] {
                text = cached
            } else {
                var reports: [String: (msn: Int, part: Int)] = [:]
                for other in s.renditions where other.playlist.name != rendition.playlist.name {
                    if let last = other.playlist.lastPart { reports[other.playlist.name] = last }
                }
                text = rendition.playlist.render(skip: skip, reports: reports)
                s.renditions[r].rendered[skip] = text
            }
            // A blocking request's URL names one version of the playlist: a cache may keep it.
            return Self.playlist(text, maxAge: msn < 0 ? 1 : 60)
        case .segment(let msn):
            if let bytes = rendition.segments[msn] { return media(bytes) }
            guard let segment = rendition.playlist.segments.first(where: { $0.msn == msn }) else {
                return msn < (rendition.playlist.segments.first?.msn ?? 0) || rendition.playlist.ended ? Self.text(404, "404: no segment \(msn)\n") : nil
            }
            guard segment.duration != nil else { return rendition.playlist.ended ? Self.text(404, "404: segment \(msn) was never finished\n") : nil }
            let path = "\(shape.folder)/\(rendition.playlist.name)/\(LowLatencyPlaylist.segmentURI(msn))"
            guard let data = FileManager.default.contents(atPath: path) else { return Self.text(404, "404: segment \(msn) is gone\n") }
            return media([UInt8](data))
        case .part(let msn, let part):
            if let bytes = rendition.parts[msn], part < bytes.count { return media(bytes[part]) }
            if let w = rendition.writing, w.msn == msn, w.part == part {
                return Response.pieces(200, headers: mediaHeaders) { [weak self] writer in self?.stream(writer, rendition: r, msn: msn, part: part) }
            }
            let segment = rendition.playlist.segments.first { $0.msn == msn }
            // A finished segment gets no more parts; a segment gone from the list took its parts along.
            if rendition.playlist.ended || segment?.duration != nil || (segment == nil && msn < rendition.playlist.edgeSegment) {
                return Self.text(404, "404: no part \(part) of segment \(msn)\n")
            }
            return nil
        }
    }

    /// Sends what is written of a part, then each chunk as it comes, and ends with the part.
    private func stream(_ writer: any WebBodyWriter, rendition r: Int, msn: Int, part: Int) {
        state.withLock { s in
            if let bytes = s.renditions[r].parts[msn], part < bytes.count {
                writer.write(bytes[part])
                writer.end()
                return
            }
            guard let w = s.renditions[r].writing, w.msn == msn, w.part == part else {
                writer.close()
                return
            }
            for chunk in w.chunks { writer.write(chunk) }
            s.renditions[r].streams.removeAll { !$0.writer.isOpen }
            s.renditions[r].streams.append(PartStream(writer: writer, msn: msn, part: part))
        }
    }

    // MARK: Responses

    public static let cors = ["Access-Control-Allow-Origin": "*"]

    /// Parts and segments never change under their name while they are listed; a cache may keep
    /// them while a playlist can still name them.
    private var mediaHeaders: [String: String] {
        let listed = Double(shape.window ?? 10) * Double(shape.targetDuration) + 3 * Double(shape.targetDuration)
        return Self.cors.merging(["Content-Type": "video/mp4", "Cache-Control": "max-age=\(Int(listed))"]) { a, _ in a }
    }

    private func media(_ bytes: [UInt8]) -> Response { Response(status: 200, headers: mediaHeaders, body: bytes) }

    static func playlist(_ text: String, maxAge: Int) -> Response {
        Response(status: 200, headers: cors.merging(["Content-Type": "application/vnd.apple.mpegurl", "Cache-Control": "max-age=\(maxAge)"]) { a, _ in a },
                 body: Array(text.utf8))
    }

    static func text(_ status: Int, _ text: String, headers: [String: String] = [:]) -> Response {
        Response.text(status, text, headers: cors.merging(headers) { a, _ in a }.merging(["Cache-Control": "no-cache"]) { a, _ in a })
    }
}
