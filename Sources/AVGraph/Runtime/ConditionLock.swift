import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// State another thread waits on: an inbox waiting for media, a producer waiting for room, a
/// control client waiting for a node's answer. `Synchronization.Mutex` guards state but cannot
/// sleep until it changes, so this is the one place a thread here blocks on shared state: a value
/// behind a pthread mutex, with a condition variable (on the monotonic clock) to sleep on. State
/// nobody waits on goes in a `Mutex`.
///
/// Never block or call out to code that takes another lock of this kind inside a closure given
/// here: the lock is held while it runs.
public final class ConditionLock<State>: @unchecked Sendable {
    // @unchecked: pthread's mutex and condition must stay at one address, so they live in memory
    // allocated here; `state` is read and written only with `mutex` held, which the compiler cannot see.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var state: State

    public init(_ initial: sending State) {
        state = initial
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        // Deadlines are `Monotonic.now` seconds: a step of the wall clock never ends or stretches a wait.
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Reads or changes the state; nobody waiting is woken (use `withLockWakingAll` for a change
    /// a waiter may be waiting for).
    public func withLock<R>(_ body: (inout sending State) throws -> sending R) rethrows -> sending R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Changes the state and wakes every waiting thread to look at it again.
    public func withLockWakingAll<R>(_ body: (inout sending State) throws -> sending R) rethrows -> sending R {
        pthread_mutex_lock(mutex)
        // Woken once the mutex is let go: a waiter woken while it is held wakes only to sleep on
        // the mutex and be woken again (two switches a hand-over, and the lock contended).
        defer {
            pthread_mutex_unlock(mutex)
            pthread_cond_broadcast(condition)
        }
        return try body(&state)
    }

    /// Wakes every waiting thread to look at the state again, unchanged (a stop they also watch).
    public func wakeAll() { withLockWakingAll { _ in } }

    /// Runs `attempt` with the lock held until it returns a value, sleeping in between until another
    /// thread changes the state (`withLockWakingAll`), or until monotonic `deadline` passes: then
    /// `attempt` has one more try and nil comes back if it still has nothing. When the value it
    /// returns satisfies `wakingOthers` (it took or put something others wait for), every other
    /// waiter is woken.
    public func wait<R>(
        until deadline: Double? = nil, wakingOthers: (R) -> Bool = { _ in false },
        _ attempt: (inout sending State) throws -> sending R?
    ) rethrows -> sending R? {
        pthread_mutex_lock(mutex)
        var wakesOthers = false
        // Others are woken once the mutex is let go (see `withLockWakingAll`).
        defer {
            pthread_mutex_unlock(mutex)
            if wakesOthers { pthread_cond_broadcast(condition) }
        }
        while true {
            if let result = try attempt(&state) {
                wakesOthers = wakingOthers(result)
                return result
            }
            if let deadline {
                var at = timespec(tv_sec: Int(deadline.rounded(.down)), tv_nsec: Int((deadline - deadline.rounded(.down)) * 1e9))
                if pthread_cond_timedwait(condition, mutex, &at) == ETIMEDOUT {
                    let result = try attempt(&state)
                    if let result { wakesOthers = wakingOthers(result) }
                    return result
                }
            } else {
                pthread_cond_wait(condition, mutex)
            }
        }
    }
}
