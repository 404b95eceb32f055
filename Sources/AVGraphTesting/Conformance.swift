@_spi(Testing) import AVGraph
import CFFmpeg
import Foundation
import Synchronization

/// One node type set up for the conformance verifier: its options, and for a filter or sink what
/// each input carries (format, upstream name, pad, and the buffers fed to it in media-time order).
public struct ConformanceCase: Sendable {
    public struct Feed: Sendable {
        public var format: StreamFormat
        public var name: String
        public var pad: String?
        public var buffers: [MediaBuffer]
        public init(format: StreamFormat, name: String, pad: String? = nil, buffers: [MediaBuffer]) {
            self.format = format; self.name = name; self.pad = pad; self.buffers = buffers
        }
    }

    public var type: any Node.Type
    public var options: String
    public var inputs: [Feed]
    public var realtime: Bool
    /// A source: `produce` calls at most per check (a source that waits for a producer never ends by itself).
    public var produceLimit: Int
    /// False for a source with nobody feeding it (`socket`, `app`): it may emit nothing.
    public var expectsOutput: Bool
    /// True for a network sink with no server to reach: it may throw (once it knows), cleanly and in time.
    public var finishMayThrow: Bool
    /// The value set for each live option; the verifier picks one from the declaration otherwise.
    public var liveValues: [String: OptionValue]
    /// How far (a fraction) drip and burst output counts may differ: 0 but for sources paced by a
    /// wall clock (a screen grab gets one frame more or less).
    public var countTolerance: Double

    public init(_ type: any Node.Type, options: String = "", inputs: [Feed] = [], realtime: Bool = false, produceLimit: Int = 400,
                expectsOutput: Bool = true, finishMayThrow: Bool = false, liveValues: [String: OptionValue] = [:],
                countTolerance: Double = 0) {
        self.type = type; self.options = options; self.inputs = inputs; self.realtime = realtime; self.produceLimit = produceLimit
        self.expectsOutput = expectsOutput; self.finishMayThrow = finishMayThrow; self.liveValues = liveValues
        self.countTolerance = countTolerance
    }
}

/// Runs one node type through what the runtime may do to it and checks the node keeps the contract:
/// - burst: every input at once, then the end: outputs of the negotiated kind, size and rate, in time order;
/// - drip: one buffer at a time with clock ticks and outputs taken between: the same output counts as the burst;
/// - early end: the inputs end after a quarter (a source: after a few buffers); `finish` succeeds;
/// - abort then finish: neither crashes nor hangs;
/// - every live option: a change is announced by exactly one `applied` whose value has the option's type;
/// - events: the node emits only the runtime's kinds and those its type declares (`Node.events`), and
///   each declared kind's example encodes exactly the fields it declares (what the events schema says).
/// Each check runs on its own thread with a time limit, so a node that hangs is reported, not waited for.
public enum Conformance {
    public static let timeLimit: Double = 60

    /// What went wrong, one line each; empty when the node conforms.
    public static func verify(_ c: ConformanceCase) -> [String] {
        var problems: [String] = []
        let name = c.type.typeName + (c.type.inputs.isEmpty ? " (source)" : "")
        func check(_ what: String, _ body: @escaping @Sendable () throws -> [String]) {
            let box = ConditionLock<[String]?>(nil)
            let t = Thread {
                let found: [String]
                do { found = try body() } catch { found = ["threw: \(error)"] }
                box.withLockWakingAll { $0 = found }
            }
            t.stackSize = 8 << 20
            t.start()
            if let found = box.wait(until: Monotonic.now + timeLimit, { $0 }) {
                problems += found.map { "\(name): \(what): \($0)" }
            } else {
                problems.append("\(name): \(what): did not return within \(Int(timeLimit)) s")
            }
        }
        let burst = CountBox()
        check("burst") { try run(c, drip: false, counts: burst) }
        check("drip") {
            let drip = CountBox()
            var p = try run(c, drip: true, counts: drip)
            let same = drip.value.count == burst.value.count && zip(drip.value, burst.value).allSatisfy {
                Double(abs($0 - $1)) <= c.countTolerance * Double(max($0, $1))
            }
            if !same { p.append("emitted \(drip.value) buffers per output, the burst \(burst.value)") }
            return p
        }
        check("early end") { try run(c, drip: false, fraction: 0.25, counts: CountBox()) }
        check("abort then finish") {
            let h = try harness(c)
            do { try feedOrProduce(h, c, fraction: 0.25, drip: false) } catch where c.finishMayThrow {}
            h.abort()
            do { try h.finish() } catch {}
            return []
        }
        for spec in c.type.options where spec.live {
            check("live \(spec.name)") { try live(c, spec) }
        }
        check("declared events") { declaredEventFields(c.type) }
        return problems
    }

    /// The node kinds among `events` that `type` does not declare.
    static func undeclaredEvents(_ events: [Event], of type: any Node.Type) -> [String] {
        let declared = Set(type.events.map { $0.eventName })
        let emitted = Set(events.compactMap { e -> String? in
            guard case .node(let payload) = e.kind else { return nil }
            return Swift.type(of: payload).eventName
        })
        return emitted.subtracting(declared).sorted().map { "emitted event '\($0)', which its type does not declare in `events`" }
    }

    /// Each declared kind's example, encoded: every key a declared field, every required field there.
    static func declaredEventFields(_ type: any Node.Type) -> [String] {
        type.events.flatMap { kind -> [String] in
            let line = Event(.node(kind.example), node: "n", wall: 0).jsonLine
            guard case .object(let object)? = try? JSONDecoder().decode(EventValue.self, from: Data(line.utf8)) else {
                return ["\(kind.eventName): unencodable example"]
            }
            let keys = Set(object.keys).subtracting(["event", "wall", "node"])
            let fields = Set(kind.fields.map(\.name)), required = Set(kind.fields.filter(\.required).map(\.name))
            return keys.subtracting(fields).sorted().map { "event '\(kind.eventName)' writes '\($0)', which its fields do not list" }
                + required.subtracting(keys).sorted().map { "event '\(kind.eventName)' lists required '\($0)', which its example does not write" }
        }
    }

    /// `count` flat pictures of format `f` at its frame rate (30 when it has none).
    public static func rawVideo(_ f: StreamFormat, count: Int = 60) throws -> [MediaBuffer] {
        let rate = f.frameRate.num > 0 ? f.frameRate : Rational(30, 1)
        return try (0..<count).map { i in
            .frame(try TestMedia.videoFrame(width: f.width, height: f.height, pixelFormat: f.pixelFormat, pts: Int64(i),
                                            timeBase: Rational(rate.den, rate.num)) { x, y in UInt8((x + y + i * 4) & 0xff) })
        }
    }

    /// `seconds` of a -12 dBFS tone in blocks of 1024 samples, planar float at `f`'s rate and channels.
    public static func rawAudio(_ f: StreamFormat, seconds: Double = 2) throws -> [MediaBuffer] {
        try TestMedia.toneBlocks(freq: 440, dBFS: -12, seconds: seconds, rate: f.sampleRate, channels: f.channels).map { .frame($0) }
    }

    static func harness(_ c: ConformanceCase) throws -> NodeHarness {
        try NodeHarness(c.type, options: c.options, inputs: c.inputs.map(\.format), inputNames: c.inputs.map(\.name),
                        pads: c.inputs.contains { $0.pad != nil } ? c.inputs.map { $0.pad ?? "" } : nil, realtime: c.realtime)
    }

    /// The inputs' buffers merged in media-time order, each a new reference (a node may write into what it gets).
    static func ordered(_ c: ConformanceCase, fraction: Double) -> [(input: Int, buffer: MediaBuffer)] {
        var all: [(Int, MediaBuffer)] = []
        for (i, feed) in c.inputs.enumerated() {
            let n = Int((Double(feed.buffers.count) * fraction).rounded(.up))
            all += feed.buffers.prefix(n).map { (i, $0.newReference) }
        }
        return all.enumerated().sorted { a, b in
            a.element.1.time != b.element.1.time ? a.element.1.time < b.element.1.time : a.offset < b.offset
        }.map { (input: $0.element.0, buffer: $0.element.1) }
    }

    @discardableResult
    static func feedOrProduce(_ h: NodeHarness, _ c: ConformanceCase, fraction: Double, drip: Bool,
                              collected: OutputLog? = nil) throws -> Bool {
        if c.inputs.isEmpty {
            let limit = max(1, Int(Double(c.produceLimit) * fraction))
            var calls = 0, clock = 0.0
            while calls < limit, try h.produce() {
                calls += 1
                if drip {
                    clock += 0.01
                    try h.tick(at: clock)
                    collected?.take(h)
                }
            }
            return calls < limit
        }
        var clock = 0.0
        for (input, buffer) in ordered(c, fraction: fraction) {
            try h.feed(buffer, input: input)
            if drip {
                clock = max(clock, Double(buffer.time) / 1e6)
                try h.tick(at: clock)
                collected?.take(h)
            }
        }
        return true
    }

    static func run(_ c: ConformanceCase, drip: Bool, fraction: Double = 1, counts: CountBox) throws -> [String] {
        let h = try harness(c)
        let log = OutputLog(outputs: h.outputFormats.count)
        do {
            try feedOrProduce(h, c, fraction: fraction, drip: drip, collected: log)
            if !c.inputs.isEmpty { for i in c.inputs.indices { try h.endInput(i) } }
            try h.finish()
        } catch {
            if c.finishMayThrow { return [] }
            return ["threw: \(error)"]
        }
        log.take(h)
        counts.set(log.buffers.map(\.count))
        return checkOutputs(log.buffers, formats: h.outputFormats, expectsOutput: c.expectsOutput && fraction == 1)
            + undeclaredEvents(h.emittedEvents, of: c.type)
    }

    static func checkOutputs(_ outputs: [[MediaBuffer]], formats: [StreamFormat], expectsOutput: Bool) -> [String] {
        var problems: [String] = []
        for (o, buffers) in outputs.enumerated() {
            let f = formats[o]
            if expectsOutput && buffers.isEmpty { problems.append("output \(o) emitted nothing") }
            var last = Int64.min
            for (i, b) in buffers.enumerated() {
                switch b {
                case .frame(let frame):
                    if f.kind.isEncoded { problems.append("output \(o): a frame where \(f.kind) packets were negotiated"); break }
                    if f.kind.isVideo && (frame.width != f.width || frame.height != f.height) {
                        problems.append("output \(o) buffer \(i): \(frame.width)x\(frame.height), negotiated \(f.width)x\(f.height)")
                    }
                    if f.kind == .rawAudio && frame.sampleRate != f.sampleRate {
                        problems.append("output \(o) buffer \(i): \(frame.sampleRate) Hz, negotiated \(f.sampleRate)")
                    }
                case .packet:
                    if !f.kind.isEncoded { problems.append("output \(o): a packet where raw \(f.kind) was negotiated") }
                }
                if b.time < last { problems.append("output \(o) buffer \(i): time \(b.time) µs after \(last) µs"); break }
                last = b.time
            }
        }
        return problems
    }

    static func live(_ c: ConformanceCase, _ spec: OptionSpec) throws -> [String] {
        guard let value = c.liveValues[spec.name] ?? liveValue(spec, inputNames: c.inputs.map(\.name)) else {
            return ["no value to set for \(spec.type.name): give one in liveValues"]
        }
        let h = try harness(c)
        try feedOrProduce(h, c, fraction: 0.25, drip: false)
        try h.set(spec.name, value)
        // The change shows from the next buffer the node emits: give it the rest.
        if c.inputs.isEmpty { _ = try h.produce(10) } else {
            for (input, buffer) in ordered(c, fraction: 1).dropFirst(ordered(c, fraction: 0.25).count) { try h.feed(buffer, input: input) }
            for i in c.inputs.indices { try h.endInput(i) }
        }
        do { try h.finish() } catch where c.finishMayThrow {}
        let applied = h.emittedEvents.compactMap { e -> Event.Applied? in
            if case .applied(let a) = e.kind, a.option == spec.name { return a }
            return nil
        }
        guard applied.count == 1 else { return ["\(applied.count) applied events for one change, want 1"] }
        guard let want = eventValueKind(spec.type), applied[0].value.matches(want) else {
            return ["applied value \(applied[0].value) is not a \(spec.type.name)"]
        }
        return []
    }

    /// A value the declaration admits and that differs from the default.
    static func liveValue(_ spec: OptionSpec, inputNames: [String]) -> OptionValue? {
        let current = try? spec.parsedDefault()
        func pick(_ t: OptionType) -> OptionValue? {
            switch t {
            case .bool: return .bool(current != .bool(true))
            case .int(let r): return .int(r.lowerBound + (r.upperBound - r.lowerBound) / 2)
            case .bitrate(let r): return .int(min(r.upperBound, max(r.lowerBound, 1_000_000)))
            case .number(let r): return .number(r.lowerBound.isFinite && r.upperBound.isFinite ? (r.lowerBound + r.upperBound) / 2 : 1)
            case .duration(let r): return .duration(min(r.upperBound, max(r.lowerBound, 0.25)))
            case .gain: return .number(0.5)
            case .choice(let choices): return choices.first { current != .string($0) }.map { .string($0) }
            case .perInput(let inner): return inputNames.first.flatMap { n in pick(inner).map { .perInput([n: $0]) } }
            default: return nil
            }
        }
        guard let v = pick(spec.type), spec.type.admits(v) else { return nil }
        return v
    }

    enum ValueKind { case bool, int, number, string, object(ValueKindBox) }
    final class ValueKindBox { let inner: ValueKind; init(_ k: ValueKind) { inner = k } }

    /// The JSON type an option's value has in `applied`.
    static func eventValueKind(_ t: OptionType) -> ValueKind? {
        switch t {
        case .bool: return .bool
        case .int, .bitrate, .byteSize, .loop: return .int
        case .number, .duration, .gain, .rate: return .number
        case .string, .choice: return .string
        case .perInput(let inner): return eventValueKind(inner).map { .object(ValueKindBox($0)) }
        default: return nil
        }
    }
}

extension EventValue {
    func matches(_ kind: Conformance.ValueKind) -> Bool {
        switch (self, kind) {
        case (.bool, .bool), (.int, .int), (.string, .string): return true
        case (.number, .number), (.int, .number): return true
        case (.object(let o), .object(let inner)): return !o.isEmpty && o.values.allSatisfy { $0.matches(inner.inner) }
        default: return false
        }
    }
}

extension MediaBuffer {
    /// A second reference to the same media (its own header).
    var newReference: MediaBuffer {
        switch self {
        case .frame(let f): .frame(f.ref())
        case .packet(let p): .packet(p.ref())
        }
    }
}

/// What a node emitted per output, taken as it goes (drip) or at the end.
final class OutputLog {
    var buffers: [[MediaBuffer]]
    init(outputs: Int) { buffers = Array(repeating: [], count: outputs) }
    func take(_ h: NodeHarness) { for o in buffers.indices { buffers[o] += h.emitted(o) } }
}

final class CountBox: Sendable {
    private let counts = Mutex<[Int]>([])
    func set(_ c: [Int]) { counts.withLock { $0 = c } }
    var value: [Int] { counts.withLock { $0 } }
}
