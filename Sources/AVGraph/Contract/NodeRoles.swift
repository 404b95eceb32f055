/// What a node does in a pipeline, from the role class its type derives from.
public enum NodeRole: String, Sendable {
    /// Makes media: no inputs, at least one output (`Source`).
    case source
    /// Receives media and emits media: inputs and outputs (`Filter`).
    case filter
    /// Receives media and finishes it (a file, a stream): inputs, no outputs (`Sink`).
    case sink
    /// Derives from none of the three: the registry refuses it.
    case none
}

// The hooks are overridable methods of one role class per role, not defaulted protocol
// requirements: Swift checks an `override` against the class, so a misspelled hook
// (`override func recieve`) does not compile, and the other roles' hooks are final members
// here, so declaring one (`func produce` in a filter, with or without `override`) does not
// compile either. A defaulted protocol requirement would accept both and never call them.

/// The hooks every role has. Every call comes from the one thread that runs the node, with its
/// outlet: the one context a node emits on, stamps events with and reads the clock from.
/// Not `Sendable`: a node's state is its thread's, so a node class needs no lock and no
/// `@unchecked Sendable` of its own; what it shares with other threads it keeps in a type that is.
open class NodeHooks {
    public init() {}

    /// Every input ended, the source reached its end, or the run stops: flush and finalize.
    open func finish(_ out: Outlet) throws {}
    /// The run failed elsewhere: keep what can be kept (a sink still finalizes its file).
    open func abort() {}
    /// A live option change, made by the runtime on the node's own thread before its next buffer,
    /// once the option was found live and the value within its declared range: the node assigns
    /// it (read it with `Setting.value(in:_:)`); the runtime announces `applied`.
    open func set(option: String, to value: OptionValue) throws {
        throw MediaError("option '\(option)' cannot be changed while running")
    }

    static func missing(_ hook: String, _ node: NodeHooks) -> MediaError {
        MediaError("\(type(of: node)) does not override \(hook)")
    }
}

/// A node that makes media (a file, a generator, a socket): the runtime calls `produce` until
/// it returns false or the run stops, then `finish`.
open class Source: NodeHooks {
    /// Make the next media and emit it; false at the end of the stream.
    open func produce(_ out: Outlet) throws -> Bool { throw Self.missing("produce(_:)", self) }
    /// Realtime runs hold each buffer a source emits until the clock reaches its media time; a
    /// buffer at most this many seconds ahead goes on at once. A source whose media comes in real
    /// time already and is stamped by its arrival (a network publisher) lands a little ahead of
    /// the clock: its timeline is anchored on the grid and once the stream is open. Holding each
    /// buffer back those milliseconds would only cost its thread a sleep and a wake-up.
    open var mediaTimeSlack: Double { 0 }

    @available(*, deprecated, message: "a source has no inputs: only filters and sinks receive")
    public final func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {}
    @available(*, deprecated, message: "a source has no inputs: only filters and sinks hear of an input's end")
    public final func inputEnded(_ input: Int, _ out: Outlet) throws {}
    @available(*, deprecated, message: "a source has no inputs: only filters hold one back")
    public final func wantsInput(_ input: Int) -> Bool { true }
    @available(*, deprecated, message: "a source is not ticked: produce runs on its own pace")
    public final func tick(_ out: Outlet) throws {}
}

/// The hooks of a node with inputs: buffers arrive, inputs end, realtime runs tick it.
open class Consumer: NodeHooks {
    /// One buffer arrived on input connection `input` (an index into `setup.inputs`).
    open func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws { throw Self.missing("receive(_:input:_:)", self) }
    /// Realtime runs: called every `tickInterval` seconds, so a node can emit on the clock.
    /// A node that does not override it is called once, then never again.
    open func tick(_ out: Outlet) throws { ticks = false }
    /// Realtime runs: seconds between `tick`s, the node's own deadlines; nil: never ticked, its
    /// thread sleeps until media, an input's end, a live change or the run's stop wakes it.
    /// Asked on the node's thread before each wait. The default: every 20 ms for a node that
    /// overrides `tick`, nil once the first tick showed that it does not.
    open var tickInterval: Double? { ticks ? 0.02 : nil }
    /// Cleared by the base `tick`: the node has no deadlines of its own.
    private var ticks = true
    /// An input reached its end.
    open func inputEnded(_ input: Int, _ out: Outlet) throws {}

    @available(*, deprecated, message: "a node with inputs does not produce: only a Source does")
    public final func produce(_ out: Outlet) throws -> Bool { false }
}

/// A node that receives media and emits media (a scaler, an encoder, a mixer).
open class Filter: Consumer {
    /// Whether the node wants more from input `input` now (a mixer holds back an input that runs ahead).
    open func wantsInput(_ input: Int) -> Bool { true }
}

/// A node that receives media and finishes it (a file, a stream, a counter): it has no outputs.
open class Sink: Consumer {
    @available(*, deprecated, message: "a sink takes every input as it comes: only a Filter holds one back")
    public final func wantsInput(_ input: Int) -> Bool { true }
}
