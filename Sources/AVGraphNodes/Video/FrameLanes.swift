import AVGraph
import Foundation

/// A filter's per-picture work on several threads at once, one picture per thread, the results
/// handed on in arrival order. For offline runs, where throughput counts: a picture scaled on
/// one core by a single-threaded scaler does the same work as one split into slices, without
/// the slices' barrier, so two lanes keep both cores busy where slices left them waiting
/// (bench/run W2). Each lane owns its `State` (swscale contexts are not shared between threads).
/// Realtime runs do not use lanes: there a picture's latency counts, and a picture split across
/// every core is done soonest.
final class FrameLanes<State> {
    /// One picture's result, handed from its lane to the node's thread.
    private typealias Job = ConditionLock<Result<Frame, Error>?>

    private let queues: [DispatchQueue]
    private let states: [State]
    /// Pictures started and not yet handed on, oldest first (touched by the node's thread only).
    private var pending: [Job] = []
    private var next = 0

    init(count: Int, label: String, makeState: () -> State) {
        queues = (0..<max(1, count)).map { DispatchQueue(label: "\(label).lane\($0)", qos: .userInitiated) }
        states = queues.map { _ in makeState() }
    }

    /// Lanes for an offline run on this machine: one per core, up to `limit`.
    static func offlineCount(limit: Int = 4) -> Int { min(limit, max(1, ProcessInfo.processInfo.activeProcessorCount)) }

    /// Starts `work` on `frame` in the next lane, then hands on every finished picture ahead of
    /// it; waits only while every lane is busy (the back-pressure of a single-threaded filter).
    func submit(_ frame: Frame, _ out: Outlet, work: @escaping @Sendable (Frame, State) throws -> Frame) throws {
        let job = Job(nil)
        let lane = next % queues.count
        next += 1
        // Only this lane's queue ever touches its state.
        nonisolated(unsafe) let state = states[lane]
        queues[lane].async {
            let result = Result(catching: { try work(frame, state) })
            job.withLockWakingAll { $0 = result }
        }
        pending.append(job)
        while pending.count >= queues.count { try handOnOldest(out) }
    }

    /// Hands on every picture still being worked on, in order (end of stream).
    func drain(_ out: Outlet) throws {
        while !pending.isEmpty { try handOnOldest(out) }
    }

    /// Waits for the pictures still being worked on and drops them (the run failed elsewhere).
    func discard() {
        for job in pending { _ = job.wait { $0 } }
        pending.removeAll()
    }

    private func handOnOldest(_ out: Outlet) throws {
        let job = pending.removeFirst()
        out.emit(try job.wait { $0 }!.get())
    }
}
