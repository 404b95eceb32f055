@_spi(Testing) import AVGraph
import Foundation

/// Runs one node by hand, without threads, as SwiftNIO's `EmbeddedChannel` runs one handler:
/// give it options and input formats, feed it buffers, read what it emitted. The node is driven
/// by the run's own driver (`RoleDriver`), called on the test's thread: what is fed goes into the
/// node's inbox and is taken in a run's order (a mixer's held-back input waits there), timed
/// changes (`set(_:_:at:)`) are taken before the first buffer at their media time, control
/// commands (`answer`) at the node's turn, and `applied` is announced as a run announces it.
///
///     let h = try NodeHarness(ResizeNode.self, options: "size: 320x240", inputs: [.video(width: 640, height: 480, ...)])
///     try h.feed(.frame(frame))
///     let out = h.emitted()
public final class NodeHarness {
    let embedded: EmbeddedNode
    public var node: any Node { embedded.node }
    public var setup: NodeSetup { embedded.setup }
    public var events: EventLog { embedded.events }
    public var realtime: Bool { embedded.realtime }
    public var duration: Double? { embedded.duration }
    public var clock: Double { embedded.clock }
    /// Every event the node emitted, as JSON lines.
    public var eventLines: [String] { embedded.eventLines }

    /// `options` is the node's body in `.pipe` syntax (`"size: 320x240, mode: fit"`); defaults fill the rest.
    /// Input connection `i` has format `inputs[i]`, comes from upstream `inputNames[i]` (default `in<i>`) and
    /// arrives on pad `pads[i]` (default: the first pad taking its kind), as `in: {main: app, key: mic}` would.
    public init(_ type: any Node.Type, options: String = "", inputs: [StreamFormat] = [], inputNames: [String]? = nil,
                pads inputPads: [String]? = nil,
                realtime: Bool = false, baseDirectory: String = FileManager.default.currentDirectoryPath) throws {
        let names = inputNames ?? inputs.indices.map { "in\($0)" }
        // Options are parsed by the same table and parser `check` uses.
        let (value, diagnostics) = PipeLoader.parse(data: Data("{\(options)}".utf8), file: "harness")
        guard let value, diagnostics.isEmpty, let entries = value.entries else {
            throw MediaError("harness options do not parse: \(diagnostics.map(\.description).joined(separator: "; "))")
        }
        var values = OptionValues()
        for spec in type.options {
            if let e = entries.first(where: { $0.key == spec.name }) {
                do { values[spec.name] = try spec.type.parse(e.value) } catch { throw MediaError("option \(spec.name): \(error.message)") }
            }
        }
        values.fillDefaults(from: type.options)
        for e in entries where type.option(e.key) == nil { throw MediaError("\(type.typeName) has no option '\(e.key)'") }
        let pads = type.inputs
        if let inputPads {
            for p in inputPads where !pads.contains(where: { $0.name == p }) { throw MediaError("\(type.typeName) has no input pad '\(p)'") }
        }
        let connected = inputs.enumerated().map { i, f -> Negotiation.Input in
            if let inputPads, i < inputPads.count { return Negotiation.Input(pad: inputPads[i], from: names[i], format: f) }
            let pad = pads.first { $0.kinds.contains(f.kind) } ?? pads.first
            return Negotiation.Input(pad: pad?.name ?? "in", from: names[i], format: f)
        }
        let negotiation = Negotiation(nodeName: "node", options: values, inputs: connected, baseDirectory: baseDirectory, realtime: realtime)
        let outputs: [StreamFormat]
        do { outputs = try type.negotiate(negotiation) } catch { throw MediaError("negotiate: \(error.message)") }
        guard outputs.count == type.outputs.count else {
            throw MediaError("negotiate returned \(outputs.count) formats for \(type.outputs.count) output pads")
        }
        let setup = NodeSetup(name: "node", options: values, inputs: connected, outputs: outputs, baseDirectory: baseDirectory,
                              realtime: realtime, duration: (type as? any EndsByItself.Type)?.mediaDuration(values))
        embedded = try EmbeddedNode(type, setup: setup)
    }

    /// The negotiated output formats.
    public var outputFormats: [StreamFormat] { setup.outputs }

    /// Hands one buffer to the node on input `input`: queued on that input, as an upstream node's
    /// would be, then taken by the node with whatever else it wants of its inputs now.
    public func feed(_ buffer: MediaBuffer, input: Int = 0) throws { try embedded.receive(buffer, input: input) }
    public func feed(_ frame: Frame, input: Int = 0) throws { try feed(.frame(frame), input: input) }

    /// Asks a source for up to `count` more buffers; false when it ended.
    @discardableResult
    public func produce(_ count: Int = 1) throws -> Bool {
        for _ in 0..<count { if try !embedded.produce() { return false } }
        return true
    }

    public func endInput(_ input: Int = 0) throws { try embedded.inputEnded(input) }
    public func tick(at clock: Double) throws { try embedded.tick(at: clock) }
    public func finish() throws { try embedded.finish() }
    /// What the runtime calls on the other nodes when one fails: let go of everything, do not flush.
    public func abort() { embedded.abort() }
    /// A live change as the runtime makes it: checked against the declaration, taken by the node
    /// now, announced as `applied` with the media time of the next buffer it emits.
    public func set(_ option: String, _ value: OptionValue) throws { try embedded.set(option, value) }
    /// A timed live change, as `avgraph ctl set NODE.OPTION VALUE --at T`: taken before the first
    /// buffer fed at or after media time `at` (a node's refusal is thrown by that feed).
    public func set(_ option: String, _ value: OptionValue, at: Double) throws { try embedded.set(option, value, at: at) }
    /// A control command the node answers (`AnswersControl`), asked as the control socket asks it.
    public func answer(_ request: NodeControlRequest) -> NodeControlAnswer { embedded.answer(request) }
    /// What a sink received so far (bytes, video frames, media span), as the run's `eos` reports it.
    public var received: Event.SinkSummary { embedded.received }

    /// Takes what the node emitted on `output` so far.
    public func emitted(_ output: Int = 0) -> [MediaBuffer] { embedded.take(output) }

    public func emittedFrames(_ output: Int = 0) -> [Frame] { emitted(output).compactMap(\.frame) }

    /// Takes the audio emitted on `output` so far as one array of samples of `channel`, in -1...1
    /// (any sample format), checking on the way that the blocks follow each other without gaps.
    public func emittedSamples(_ output: Int = 0, channel: Int = 0) throws -> [Double] {
        var samples: [Double] = []
        var next: Int64?
        for f in emittedFrames(output) {
            if let next, f.pts != next { throw MediaError("audio not continuous: block at \(f.pts), expected \(next)") }
            next = f.pts + Int64(f.sampleCount)
            let a = AudioSamples(f)
            for i in 0..<a.count { samples.append(a.value(channel: channel, index: i)) }
        }
        return samples
    }

    /// Feeds several inputs' frames in media-time order, as the scheduler would deliver them
    /// (frame `k` of `inputs[i]` goes to input `i`); `end` then ends every input and finishes.
    public func feedByTime(_ inputs: [[Frame]], end: Bool = true) throws {
        var next = [Int](repeating: 0, count: inputs.count)
        while true {
            var pick: Int?
            for i in inputs.indices where next[i] < inputs[i].count {
                if pick == nil || inputs[i][next[i]].seconds < inputs[pick!][next[pick!]].seconds { pick = i }
            }
            guard let i = pick else { break }
            try feed(inputs[i][next[i]], input: i)
            next[i] += 1
        }
        if end { try endAll() }
    }

    /// Runs a source node by hand until it ends (give it a `duration`) and returns its output
    /// format and frames: test media from the real sources (`testsrc`, `tone`) without a pipeline.
    public static func frames(from source: any Node.Type, options: String, limit: Int = 1_000_000) throws -> (format: StreamFormat, frames: [Frame]) {
        let h = try NodeHarness(source, options: options)
        var n = 0
        while n < limit, try h.produce() { n += 1 }
        return (h.outputFormats[0], h.emittedFrames())
    }

    /// Feeds frames on input `input`, one by one.
    public func feed(_ frames: [Frame], input: Int = 0) throws { for f in frames { try feed(f, input: input) } }

    /// Ends every input, then finishes the node (the end of a run).
    public func endAll() throws {
        for i in setup.inputs.indices { try endInput(i) }
        try finish()
    }

    /// The events the node emitted with this name (a `custom` event's own name too), as decoded JSON
    /// objects (`events(named: "applied").first?["media_time"]?.double`).
    public func events(named name: String) -> [[String: EventValue]] {
        eventLines.compactMap { line in
            guard case .object(let o)? = try? JSONDecoder().decode(EventValue.self, from: Data(line.utf8)) else { return nil }
            let event = o["event"]?.string
            return event == name || (event == Event.Custom.eventName && o["name"]?.string == name) ? o : nil
        }
    }

    /// Every event the node emitted, typed.
    public var emittedEvents: [Event] { eventLines.compactMap { try? Event.decode(line: $0) } }
    public func emittedPackets(_ output: Int = 0) -> [Packet] { emitted(output).compactMap(\.packet) }

}
