import AVGraph
import Foundation
import Synchronization

/// A `.pipe` run inside an app: load it, `start()` it, push media into its `app` sources from
/// any thread, `finish()` them (or `stop()`), `wait()` for the files to be finalized.
///
/// ```swift
/// let live = try LivePipeline(path: "broadcast.pipe", overrides: ["out.path=/tmp/b.mp4"])
/// try live.start()
/// let screen = live.appSource(named: "screen")!
/// _ = screen.pushNV12(width: w, height: h, y: yPlane, yStride: w, uv: uvPlane, uvStride: w,
///                     time: seconds, orientation: .up)          // .taken / .dropped / .rejected
/// screen.finish()
/// try live.wait()
/// ```
///
/// Or without blocking a thread: `try await live.run()` (cancelling the task stops the run and
/// still finalizes the files), `for await event in live.events`, `try await live.control(.stats)`.
public final class LivePipeline: Sendable {
    public struct Invalid: Error, CustomStringConvertible {
        public let diagnostics: [Diagnostic]
        public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
    }

    public let pipeline: CheckedPipeline
    /// The run's events: `for await event in live.events` (ends after `eos`), or listeners.
    public let events: EventLog
    private let run: PipelineRun
    private let done = DispatchGroup()
    private struct State {
        var started = false
        /// Set once the run has ended: nil failure for a clean end.
        var ended: Result<Void, Error>?
        var waiting: [CheckedContinuation<Void, Error>] = []
        var sources: [String: AppSource] = [:]
    }
    private let state = Mutex(State())

    /// Loads and checks `path`; `overrides` are `NODE.OPTION=VALUE` like `avgraph run --set`.
    /// Runs in realtime unless the file says otherwise (an `app` source is live).
    public init(path: String, overrides: [String] = [], events: EventLog = EventLog(output: .none),
                registry: NodeRegistry = BuiltinNodes.registry()) throws {
        let parsed = try overrides.map { text -> OptionOverride in
            guard let o = OptionOverride(parsing: text) else { throw MediaError("override '\(text)' is not NODE.OPTION=VALUE") }
            return o
        }
        var checker = Checker(registry: registry, overrides: parsed)
        checker.loadsFilePlugins = true  // the app runs the file it ships, plugins included
        let checked = checker.check(path: path)
        guard checked.isValid else { throw Invalid(diagnostics: checked.diagnostics) }
        pipeline = checked
        self.events = events
        run = try PipelineRun(checked, events: events)
    }

    /// Starts every node on its own thread and returns at once.
    public func start() {
        let first = state.withLock { s in
            defer { s.started = true }
            return !s.started
        }
        guard first else { return }
        done.enter()
        let thread = Thread { [self] in
            let outcome: Result<Void, Error>
            do { try run.run(); outcome = .success(()) } catch { outcome = .failure(error) }
            let waiting = state.withLock { s in
                s.ended = outcome
                defer { s.waiting = [] }
                return s.waiting
            }
            for w in waiting { w.resume(with: outcome) }
            done.leave()
        }
        thread.name = "avgraph-run"
        thread.start()
    }

    /// Runs to the end without blocking a thread: starts the run (if `start()` did not) and returns
    /// once it has ended, throwing the first node failure. Cancelling the task stops the run as
    /// `stop()` does (reason `cancelled`): sources end, encoders flush, and `run()` returns, without
    /// an error, only once the files are finalized.
    public func run() async throws {
        start()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, Error>) in
                let ended = state.withLock { s in
                    if s.ended == nil { s.waiting.append(waiter) }
                    return s.ended
                }
                if let ended { waiter.resume(with: ended) }
            }
        } onCancel: {
            stop(reason: "cancelled")
        }
    }

    /// The push handle of the `app` source called `name` (nil if there is none).
    public func appSource(named name: String) -> AppSource? {
        state.withLock { s in
            if let source = s.sources[name] { return source }
            guard let node = run.node(named: name) as? AppSourceNode else { return nil }
            let source = AppSource(name: name, hub: node.hub)
            s.sources[name] = source
            return source
        }
    }

    /// Ends the run: sources stop, encoders flush, files are finalized. `reason` is the `stopping`
    /// event's and the `eos` line's.
    public func stop(reason: String = "stop") { run.stop(reason: reason) }

    /// Pauses the recording (as `avgraph ctl NAME pause`): pushed media is dropped until `resume`,
    /// and the paused span is cut out of the output. False when already paused.
    @discardableResult public func pause() -> Bool { run.pause() }
    /// Resumes after `pause`; false when not paused.
    @discardableResult public func resume() -> Bool { run.resume() }

    /// Waits until the run has ended (every `app` source finished, `duration` reached or `stop()`);
    /// throws the first node failure.
    public func wait() throws {
        done.wait()
        if case .failure(let failure) = state.withLock({ $0.ended }) { throw failure }
    }

    /// Seconds on the pipeline clock.
    public var clock: Double { run.mediaClock }
    /// The figures of the `stats` event, now.
    public func stats() -> Event.Stats { run.stats() }

    /// Asks what `avgraph ctl` asks, answered as the control socket answers it, waiting for the
    /// answer (a `set` up to 5 s): the reply or the refusal, the body typed by the command
    /// (`try live.control(.stats).body?.paused`).
    public func control<Reply>(_ command: ControlCommand<Reply>) throws -> ControlAnswer<Reply> {
        try ControlAnswer<Reply>.decode(line: Data(run.answer(controlLine: Array(ControlEnvelope(command.request).line))))
    }

    /// Asks `command` without blocking and returns its reply, typed by the command
    /// (`try await live.control(.stats).stats.mediaTime`); throws the `ControlRefusal` the socket would send.
    public func control<Reply>(_ command: ControlCommand<Reply>) async throws -> Reply { try await run.control(command) }
}

/// Pushes media into one `app` source. Every push copies the buffer once into a pooled frame
/// and queues it, or refuses it, without ever waiting: safe to call from a capture callback.
/// `time` is the buffer's timestamp in seconds on the producer's clock (a `CMTime`'s seconds);
/// nil stamps it on arrival.
public final class AppSource: Sendable {
    public enum AudioInput: Int, Sendable { case app = 1, mic = 2 }

    public let name: String
    let hub: IngestHub

    init(name: String, hub: IngestHub) {
        self.name = name
        self.hub = hub
    }

    /// One NV12 picture: a luma plane and an interleaved CbCr plane, each with its stride in bytes.
    /// `fullRange`: a `420YpCbCr8BiPlanarFullRange` buffer (ReplayKit's usual one).
    public func pushNV12(width: Int, height: Int, y: UnsafeRawPointer, yStride: Int, uv: UnsafeRawPointer, uvStride: Int,
                         time: Double?, orientation: Orientation = .up, fullRange: Bool = false) -> PushResult {
        hub.producerAway = false
        return hub.pushVideo(format: .nv12, width: width, height: height,
                      planes: [PlaneCopy.Plane(base: y, stride: yStride), PlaneCopy.Plane(base: uv, stride: uvStride)],
                      time: time, orientation: orientation, fullRange: fullRange)
    }

    /// One NV12 picture without a copy: the pipeline reads the planes in place and keeps `owner`
    /// (the object owning them, e.g. a retained pixel buffer) alive until it is done with them.
    /// The planes must not change until then. Cheapest for full-size screens.
    public func pushNV12(width: Int, height: Int, y: UnsafeRawPointer, yStride: Int, uv: UnsafeRawPointer, uvStride: Int,
                         time: Double?, orientation: Orientation = .up, fullRange: Bool = false, owner: AnyObject) -> PushResult {
        hub.producerAway = false
        return hub.pushBorrowedVideo(format: .nv12, width: width, height: height,
                              planes: [PlaneCopy.Plane(base: y, stride: yStride), PlaneCopy.Plane(base: uv, stride: uvStride)],
                              owner: owner, time: time, orientation: orientation, fullRange: fullRange)
    }

    /// One BGRA picture (4 bytes a pixel, `stride` bytes a row).
    public func pushBGRA(width: Int, height: Int, data: UnsafeRawPointer, stride: Int, time: Double?,
                         orientation: Orientation = .up) -> PushResult {
        hub.producerAway = false
        return hub.pushVideo(format: .bgra, width: width, height: height, planes: [PlaneCopy.Plane(base: data, stride: stride)],
                      time: time, orientation: orientation)
    }

    /// One block of interleaved PCM (`s16`, `f32` or `s32`; `bigEndian` as some app audio arrives)
    /// for the app-audio output (`audio` pad) or the microphone (`mic` pad).
    public func pushAudio(_ bytes: UnsafeRawBufferPointer, format: PushSampleFormat = .s16, rate: Int, channels: Int,
                          bigEndian: Bool = false, time: Double?, to input: AudioInput = .app) -> PushResult {
        guard let base = bytes.baseAddress else { return .rejected }
        hub.producerAway = false
        return hub.pushAudio(pad: input.rawValue, bytes: base, byteCount: bytes.count, format: format, bigEndian: bigEndian,
                             rate: rate, channels: channels, time: time)
    }

    /// The active privacy trigger: the app opens (or leaves) a sensitive screen. Every picture
    /// pushed afterwards whose `time` is at or after `time` shows the privacy card (`card`: a
    /// name from the `privacy` node's `cards`; nil: its current card), none before; `time` nil:
    /// from the next picture pushed. Call it before pushing the pictures it covers. Never waits;
    /// false when refused (a card name that is not 1-64 of A-Z a-z 0-9 - _, or a time not finite).
    @discardableResult
    public func setPrivacy(_ on: Bool, card: String? = nil, time: Double? = nil) -> Bool {
        hub.pushPrivacy(on: on, card: card, time: time)
    }

    /// The producer is done: what is queued still goes through, then the source ends.
    public func finish() { hub.finish() }

    /// The producer stopped sending and may come back (a broadcast extension paused or
    /// interrupted). Until its next push, `fps` and `mixer` pad nothing past its last media; if
    /// it pushes again they fill the gap then, and a run stopped meanwhile ends where its media
    /// ended. (A still screen that only sends nothing is not leaving: it is held as it happens.)
    public func leave() { hub.producerAway = true }

    /// Buffers dropped by policy so far.
    public var dropped: (video: Int, audio: Int) { hub.queue.counts }
}
