import AVGraph
import Foundation
import Synchronization

enum ProcessSignals {
    /// A standard stream closed at the start (`>&-`) is held by /dev/null: else the next file
    /// opened (a recording) would take its number and receive the events.
    static func prepareStandardStreams() {
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            // open() takes the lowest free number: this one.
            _ = open("/dev/null", O_RDWR)
        }
    }
}

/// SIGINT/SIGTERM (and SIGHUP: a recorder outlives the terminal that started it) end the
/// sources; the run drains and finalizes as at a natural end. A second
/// signal is only answered (finishing a file is what the first one asked for, and cutting it
/// short would gain a few seconds at best); a third quits at once, after any fragment being
/// written is whole: recordings stay as recorded (fragmented, playable).
final class SignalStopper: Sendable {
    let run: PipelineRun
    /// Kept so the sources live as long as this.
    private let sources = Mutex<[any DispatchSourceSignal]>([])
    private let count = Mutex(0)

    init(run: PipelineRun) { self.run = run }

    func install() {
        // A reader that goes away (`avgraph run ... | head -1`) must end the event stream, not
        // the run: writes to it fail with EPIPE instead (see StandardStreams). Only `run`:
        // `ctl watch | head -1` should still end with its reader.
        signal(SIGPIPE, SIG_IGN)
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            // Made inside the lock: a source is not Sendable, so it is the array's from the start.
            sources.withLock { sources in
                let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                // Signals that came close together arrive as one event with their count.
                s.setEventHandler { [self, s] in for _ in 0..<max(1, Int(s.data)) { received(sig) } }
                s.resume()
                sources.append(s)
            }
        }
    }

    private func received(_ sig: Int32) {
        let n = count.withLock { $0 += 1; return $0 }
        switch n {
        case 1:
            if Terminal.isTTY { Terminal.err("\nstopping: flushing encoders and finalizing files (signal twice more to quit now)") }
            run.stop(reason: sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP")
        case 2:
            Terminal.err("\nstill finalizing files; signal once more to quit now (recordings stay fragmented, and play)")
        default:
            Terminal.err("\nquitting now: recordings being finalized stay fragmented (they play)")
            JournalFile.settleForExit()
            _exit(128 + sig)
        }
    }
}
