import AVGraph
import Foundation

/// Keeps the last `window` of encoded media in memory (ReplayKit's rolling clips); on
/// `avgraph ctl PIPELINE clip save PATH` writes that window as an MP4 that starts on a
/// keyframe. Saving happens on the node's own thread (the command is asked like a live change),
/// from references to the held packets; what arrives meanwhile waits in the sink's queue.
public final class ClipsNode: Sink, Node, AnswersControl, HoldsMemory {
    public static let typeName = "clips"
    public static let summary = "keep the last seconds of encoded media in memory; write them as an MP4 on request"
    public static let inputs = [PadSpec("in", [.encodedVideo, .encodedAudio], variadic: true, doc: "encoded streams to keep")]
    static let window = Setting.duration("window", 1...600, default: "15s", doc: "how much media to keep (a clip starts on the keyframe at or before it)")
    public static let options = [window.spec]

    public static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        for input in n.inputs where !["h264", "aac"].contains(input.format.codec) {
            throw NegotiationError("clips are written as MP4, which cannot hold \(input.format.codec)")
        }
        return []
    }

    /// The window at the bitrates its encoders declare; a clip also reaches back to the keyframe
    /// before the window, up to a GOP more.
    public static func heldBytes(_ n: Negotiation, inputBitrates: [Int?]) -> HeldMemory? {
        let known = inputBitrates.compactMap { $0 }
        guard !known.isEmpty else { return nil }
        let seconds = n[Self.window]
        let bytes = Double(known.reduce(0, +)) / 8 * seconds
        return HeldMemory(bytes: Int(min(bytes, 1e15)), what: "a \(String(format: "%g", seconds))s window at \(known.reduce(0, +) / 1000) kbit/s", option: "window")
    }

    private let window: Int64
    /// Per input, packets in arrival order.
    private var held: [[Packet]]
    private var heldBytes = 0
    private var accounted = 0
    /// The newest packet time seen (µs), so the window also slides on the clock alone.
    private var newest = Int64.min
    private let hasVideo: [Bool]

    public init(_ setup: NodeSetup) throws {
        window = Int64(setup[Self.window] * 1e6)
        held = Array(repeating: [], count: setup.inputs.count)
        hasVideo = setup.inputs.map { $0.format.kind == .encodedVideo }
    }

    override public func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let p = buffer.packet else { return }
        held[input].append(p)
        heldBytes += p.byteCount
        newest = max(newest, p.time)
        trimAndAccount(now: newest, out)
    }

    /// The window slides with the pipeline clock too, not only when a packet arrives: over
    /// `memory-limit` video is dropped before it gets here, and a window that waited for the next
    /// packet would hold its bytes (and keep video dropped) for good.
    override public func tick(_ out: Outlet) throws {
        trimAndAccount(now: max(newest, Int64(out.clock * 1e6)), out)
    }

    private func trimAndAccount(now: Int64, _ out: Outlet) {
        trim(newest: now)
        let delta = heldBytes - accounted
        accounted = heldBytes
        if delta != 0 { out.account(heldBytes: delta) }
    }

    /// Drops what is older than the window, but never the keyframe a clip must start on, unless
    /// everything held is older than the window (no packet came for a whole window).
    private func trim(newest: Int64) {
        let horizon = newest - window
        for i in held.indices {
            var drop = 0
            if hasVideo[i] {
                // The last keyframe at or before the horizon stays: the clip starts there.
                var lastKey: Int?
                for (k, p) in held[i].enumerated() where p.isKeyframe {
                    if p.time <= horizon { lastKey = k } else { break }
                }
                let anyInWindow = (held[i].last?.time ?? .min) > horizon
                drop = anyInWindow ? lastKey ?? 0 : held[i].count
            } else {
                drop = held[i].firstIndex { $0.time >= horizon } ?? held[i].count
            }
            if drop > 0 {
                heldBytes -= held[i][..<drop].reduce(0) { $0 + $1.byteCount }
                held[i].removeFirst(drop)
            }
        }
    }

    override public func finish(_ out: Outlet) throws {
        held = held.map { _ in [] }
        let delta = -accounted
        accounted = 0
        heldBytes = 0
        out.account(heldBytes: delta)
    }

    public static let controlCommands = [
        ControlCommandSpec(ClipSave.command, fields: ClipSave.self, reply: ClipSaved.self, doc: "Answered by a `clips` node: write what it holds as an MP4."),
    ]

    public func answer(_ request: NodeControlRequest) -> NodeControlAnswer {
        guard let save = try? request.decode(ClipSave.self), save.action == ClipSave.action else {
            return .refused("clip takes action 'save' and a 'path'")
        }
        return write(to: save.path)
    }

    /// On the node's thread, as every control answer (`AnswersControl`): `held` is not shared.
    private func write(to path: String) -> NodeControlAnswer {
        var snapshot = held.map { $0.map { $0.ref() } }
        // Start on the first keyframe of the (first) video stream; audio from the same time.
        var start = snapshot.flatMap { $0 }.map(\.time).min() ?? 0
        if let v = hasVideo.firstIndex(of: true) {
            guard let key = snapshot[v].first(where: \.isKeyframe) else { return .refused("no keyframe held yet") }
            start = key.time
            snapshot[v] = Array(snapshot[v].drop { $0 !== key })
        }
        for i in snapshot.indices where !hasVideo[i] { snapshot[i] = snapshot[i].filter { $0.time >= start } }
        guard snapshot.contains(where: { !$0.isEmpty }) else { return .refused("nothing held yet") }
        do {
            let tmp = path + ".part"
            let muxer = try Muxer(path: tmp, format: "mp4")
            var indices: [Int] = []
            for s in snapshot {
                guard let first = s.first else { indices.append(-1); continue }
                indices.append(try muxer.addStream(first.stream.parameters, timeBase: first.timeBase))
            }
            try muxer.writeHeader(options: ["movflags": "+faststart"])
            var cursor = snapshot.map { _ in 0 }
            var written = 0
            // Interleave by time, each packet shifted so the clip starts at zero.
            while true {
                var best: Int?
                for i in snapshot.indices where cursor[i] < snapshot[i].count {
                    if best == nil || snapshot[i][cursor[i]].time < snapshot[best!][cursor[best!]].time { best = i }
                }
                guard let i = best else { break }
                let p = snapshot[i][cursor[i]]
                cursor[i] += 1
                let copy = p.ref()
                let shift = Rational.rescale(start, from: Rational(1, 1_000_000), to: p.timeBase)
                if copy.av.pointee.pts != Int64.min { copy.av.pointee.pts -= shift }
                if copy.av.pointee.dts != Int64.min { copy.av.pointee.dts -= shift }
                try muxer.write(copy.av, timeBase: p.timeBase, stream: indices[i])
                written += 1
            }
            try muxer.finish()
            if rename(tmp, path) != 0 { throw MediaError("cannot move the clip to \(path)") }
            let seconds = Double((snapshot.flatMap { $0 }.map(\.time).max() ?? start) - start) / 1e6
            return .done(ClipSaved(path: path, packets: written, seconds: seconds))
        } catch {
            try? FileManager.default.removeItem(atPath: path + ".part")
            return .refused("clip save: \(error)")
        }
    }
}

/// `{"cmd": "clip", "action": "save", "path": "/abs/clip.mp4"}`: write what a `clips` node holds.
public struct ClipSave: Codable, Sendable, Equatable {
    public static let command = "clip"
    public static let action = "save"
    public var cmd = ClipSave.command
    public var action = ClipSave.action
    public var path: String

    public init(path: String) { self.path = path }

    /// The request as `ctl` and the Swift API send it.
    public var request: ControlRequest { .node(command: cmd, fields: ["action": .string(action), "path": .string(path)]) }
}

extension ClipSave: SchemaAnnotated {
    public static var schemaKeywords: [String: [String: EventValue]] {
        ["action": ["const": .string(action)], "path": ["minLength": .int(1), "description": .string("an absolute path for the MP4")]]
    }
}

extension ControlCommand where Reply == ClipSaved {
    /// `clip save PATH`, answered by the pipeline's `clips` node.
    public static func clip(save path: String) -> Self { .init(ClipSave(path: path).request, reply: ClipSaved.self) }
}

/// The reply to `clip save`: the file written, its packets and seconds of media.
public struct ClipSaved: ControlReplyBody, Equatable, SchemaAnnotated {
    public var path: String
    public var packets: Int
    public var seconds: Double

    public init(path: String, packets: Int, seconds: Double) {
        self.path = path
        self.packets = packets
        self.seconds = seconds
    }

    public static let schemaDescription: String? = "clip save: the file written, its packets and seconds of media."
    public static var schemaKeywords: [String: [String: EventValue]] {
        ["path": ["minLength": .int(1)], "packets": ["minimum": .int(1)], "seconds": ["minimum": .int(0)]]
    }
}
