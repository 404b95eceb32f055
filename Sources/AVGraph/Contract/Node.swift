/// What the format rule of a node type sees: its options and the formats arriving on its inputs.
public struct Negotiation: Sendable {
    public struct Input: Sendable {
        public var pad: String
        /// The upstream node's name (how `mixer`'s `gain: {mic: 1.5}` names it).
        public var from: String
        /// The upstream output pad's name; empty when not known (a harness without pads).
        public var fromPad: String = ""
        public var format: StreamFormat

        public init(pad: String, from: String, fromPad: String = "", format: StreamFormat) {
            self.pad = pad
            self.from = from
            self.fromPad = fromPad
            self.format = format
        }

        /// `node.pad`, which tells apart two inputs from one node (`phone.app`, `phone.mic`).
        public var qualifiedName: String { fromPad.isEmpty ? from : "\(from).\(fromPad)" }

        /// Whether `key` (of a per-input option like mixer's `gain`) means this input:
        /// the upstream node's name, or `node.pad`.
        public func isNamed(_ key: String) -> Bool { key == from || key == qualifiedName }
    }

    public var nodeName: String
    public var options: OptionValues
    public var inputs: [Input]
    /// The folder of the `.pipe` file, for resolving relative paths.
    public var baseDirectory: String
    public var realtime: Bool

    public init(nodeName: String, options: OptionValues, inputs: [Input], baseDirectory: String, realtime: Bool) {
        self.nodeName = nodeName
        self.options = options
        self.inputs = inputs
        self.baseDirectory = baseDirectory
        self.realtime = realtime
    }

    public func inputs(on pad: String) -> [Input] { inputs.filter { $0.pad == pad } }
    public func format(on pad: String) -> StreamFormat? { inputs(on: pad).first?.format }

    /// A path option resolved against the `.pipe` file's folder.
    public func path(_ option: String) -> String? {
        options.string(option).map { PathResolver.resolve($0, relativeTo: baseDirectory) }
    }
}

/// A format rule's refusal: `check` reports it at the named option (or at the node's inputs).
public struct NegotiationError: Error, Sendable {
    public var message: String
    public var option: String?
    public var hint: String?

    public init(_ message: String, option: String? = nil, hint: String? = nil) {
        self.message = message
        self.option = option
        self.hint = hint
    }
}

/// Everything a node instance is built from: the checked options and the negotiated formats.
public struct NodeSetup: Sendable {
    public var name: String
    public var options: OptionValues
    public var inputs: [Negotiation.Input]
    public var outputs: [StreamFormat]
    public var baseDirectory: String
    public var realtime: Bool
    public var duration: Double?
    /// Per output: every node it feeds declares `standsUpright`, so pictures may leave with
    /// their orientation tag still to apply (`orient` then leaves the turn to a `resize`, which
    /// turns the small scaled picture instead of the full one).
    public var consumersStandUpright: [Bool] = []
    /// Per output: spans of media time in which every node it feeds replaces the pictures
    /// unseen (`hiddenSpans`). A picture there only has to have the right size and timing:
    /// `resize` and `orient` emit one without scaling or turning anything.
    public var consumersHide: [[TimeSpan]] = []
    /// Per output: every node its pictures reach (directly, or through nodes passing them on)
    /// declares `readsPixels` false, so pictures may leave without pixels, decoded only when a
    /// node asks (`Frame.loadPixels`): a network source then forwards packets undecoded.
    public var pixelsOnRequest: [Bool] = []
    /// The same for audio (`readsSamples`): a network source then times its AAC frames by their
    /// packets and decodes them only when a node asks (`Frame.loadSamples`).
    public var samplesOnRequest: [Bool] = []
    /// Per output: the orientation tag of its pictures reaches every viewer as a display matrix
    /// (`OrientationHandling`), so pictures may leave unturned, tag kept (`orient` then turns nothing).
    public var orientationCarried: [Bool] = []
    /// The running pipeline's name (a `socket` source names its default socket after it); empty in a harness.
    public var pipelineName = ""
    /// What the run serves over `--http` besides its page (a `whep` sink's route); nil in a harness.
    public var web: WebEndpoints?

    public init(name: String, options: OptionValues, inputs: [Negotiation.Input], outputs: [StreamFormat], baseDirectory: String,
                realtime: Bool, duration: Double?, consumersStandUpright: [Bool] = []) {
        self.name = name
        self.options = options
        self.inputs = inputs
        self.outputs = outputs
        self.baseDirectory = baseDirectory
        self.realtime = realtime
        self.duration = duration
        self.consumersStandUpright = consumersStandUpright
    }

    public func path(_ option: String) -> String? {
        options.string(option).map { PathResolver.resolve($0, relativeTo: baseDirectory) }
    }
}

/// A node type. Its static members are its contract, known to `check` and `inspect` before
/// anything runs (MediaPipe's `GetContract`); its instance methods process media, each call
/// made by the one thread that runs the node (SwiftNIO's handler: the pipeline owns threads
/// and order, the node owns one concern). A node type is a subclass of its role, `Source`,
/// `Filter` or `Sink`, which holds the hooks the runtime calls for that role.
public protocol Node: NodeHooks, SendableMetatype {
    /// The name written as `type:` in a `.pipe` file.
    static var typeName: String { get }
    static var summary: String { get }
    static var inputs: [PadSpec] { get }
    static var outputs: [PadSpec] { get }
    static var options: [OptionSpec] { get }
    /// Whether this node accepts pictures carrying any orientation tag and writes them upright itself.
    static var standsUpright: Bool { get }
    /// Spans of media time in which this node replaces every picture on input `input` without
    /// looking at it (a privacy card on a schedule). Known before the run, like the rest of the
    /// contract: a producer that feeds only such spans skips drawing those pictures.
    static func hiddenSpans(input: Int, options: OptionValues) -> [TimeSpan]
    /// Whether this node can put a card over its pictures (a privacy barrier): `check` warns when
    /// the same pictures also reach a sink by a branch that passes no such node.
    static var coversPictures: Bool { get }
    /// The event kinds this node emits besides the runtime's own (`out.event(...)`): `inspect`
    /// lists them and docs/events.schema.json describes them.
    static var events: [any NodeEvent.Type] { get }
    /// Whether this node reads the pixels of every picture on input `input` (the default). One
    /// that does not takes pictures whose pixels are not decoded yet (`Frame.awaitsPixels`) and
    /// calls `loadPixels()` on those it looks into; the pictures it emits on a raw video output
    /// reach its consumers, which are asked the same (`NodeSetup.pixelsOnRequest`).
    static func readsPixels(input: Int, options: OptionValues) -> Bool
    /// Whether this node reads the samples of every audio frame on input `input` (the default).
    /// One that does not (an encoder sending the source's own packets on) takes frames whose
    /// samples are not decoded yet (`Frame.awaitsSamples`) and calls `loadSamples()` on those it
    /// uses (`NodeSetup.samplesOnRequest`).
    static func readsSamples(input: Int, options: OptionValues) -> Bool
    /// What this node does with the orientation tag of the pictures on input `input`.
    static func orientationHandling(input: Int, options: OptionValues) -> OrientationHandling
    /// Whether this node does little per buffer and keeps no deadlines of its own (no `tick`), so
    /// it may run on the thread of its producers when they all run on one: each buffer then costs
    /// no thread wake-up of its own. A live recording (source → `privacy` → `h264`/`aac` passing
    /// packets on → `file`) runs on its source's thread. A node that works hard on every buffer
    /// (a scaler, an encoder encoding) keeps its own thread, so the work spreads over the cores.
    static func sharesProducerThread(options: OptionValues) -> Bool
    /// Whether this node keeps deadlines of its own: it overrides `Consumer.tick` (an `fps`
    /// emits on the clock). A thread shared with producers ticks none of its guests, so a type
    /// that says both this and `sharesProducerThread` is refused by `check`.
    static func keepsDeadlines(options: OptionValues) -> Bool

    /// The format rule: one output format per output pad, or a refusal.
    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat]

    init(_ setup: NodeSetup) throws
}

extension Node {
    public static var outputs: [PadSpec] { [] }
    public static var inputs: [PadSpec] { [] }
    public static var standsUpright: Bool { false }
    public static func hiddenSpans(input: Int, options: OptionValues) -> [TimeSpan] { [] }
    public static var coversPictures: Bool { false }
    public static var events: [any NodeEvent.Type] { [] }
    public static func readsPixels(input: Int, options: OptionValues) -> Bool { true }
    public static func readsSamples(input: Int, options: OptionValues) -> Bool { true }
    public static func orientationHandling(input: Int, options: OptionValues) -> OrientationHandling { .needsUpright }
    public static func sharesProducerThread(options: OptionValues) -> Bool { false }
    public static func keepsDeadlines(options: OptionValues) -> Bool { false }

    /// The role, from the class the type derives from.
    public static var role: NodeRole {
        if self is Source.Type { return .source }
        if self is Filter.Type { return .filter }
        if self is Sink.Type { return .sink }
        return .none
    }
    public static var isSource: Bool { role == .source }
    public static var isSink: Bool { role == .sink }
    public static func option(_ name: String) -> OptionSpec? { options.first { $0.name == name } }
}
