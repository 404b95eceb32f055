import CFFmpeg
import Foundation
import Synchronization

/// The output of a muxer that must stay playable whatever ends the process: the muxer writes
/// into memory, and each unit it completes (the header, then one fragment per call) reaches the
/// file in a single `pwrite`, so a kill leaves the file ending at a unit boundary. After each
/// unit the data is pushed to the disk in the background (fdatasync), which bounds what a power
/// cut loses. A failed write (a full disk, an I/O error) cuts the file back to the end of the
/// last complete unit, so what was written still plays, and every later write reports the same
/// failure.
public final class JournalFile {
    public let path: String
    /// The muxer's output (custom I/O over this journal).
    public private(set) var io: UnsafeMutablePointer<AVIOContext>?
    /// Bytes of the file that end at a unit boundary: what plays after any abnormal end.
    public private(set) var safeEnd: Int64 = 0
    /// The first write failure; everything after it repeats it.
    public private(set) var failure: MediaError?

    private let fd: Int32
    private var pending: [UInt8] = []
    /// File offset where `pending` goes.
    private var pendingStart: Int64 = 0
    /// Highest offset written or pending: the file's size once everything is out.
    private var end: Int64 = 0
    private let syncQueue = DispatchQueue(label: "avgraph.journal.sync")
    /// Whether a sync is queued, shared with the sync queue.
    private let syncScheduled = SyncSchedule()
    private var lastSync = Date.distantPast
    private var closed = false

    private final class SyncSchedule: Sendable {
        let scheduled = Mutex(false)
    }

    /// Bytes going to a journal (one at a time), so a forced exit never cuts a unit in half;
    /// `exiting` holds back every write after `settleForExit`.
    private static let writes = ConditionLock((writing: false, exiting: false))
    private static let temporaries = Mutex<Set<String>>([])

    /// What one unit is called in messages (a fragment, a cluster, a packet).
    let unit: String

    /// Creates (or empties) the file at `path`.
    public init(path: String, unit: String = "fragment") throws {
        self.path = path
        self.unit = unit
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw MediaError("cannot write '\(path)': \(String(cString: strerror(errno)))") }
        let size: Int32 = 1 << 16
        guard let buffer = av_malloc(Int(size))?.assumingMemoryBound(to: UInt8.self) else {
            Foundation.close(fd)
            throw MediaError("out of memory (av_malloc)")
        }
        let opaque = Unmanaged.passUnretained(self).toOpaque()
        io = avio_alloc_context(buffer, size, 1, opaque, nil, { opaque, buf, size in
            guard let opaque, let buf else { return 0 }
            Unmanaged<JournalFile>.fromOpaque(opaque).takeUnretainedValue().pending.append(contentsOf: UnsafeBufferPointer(start: buf, count: Int(size)))
            return size
        }, { opaque, offset, whence in
            guard let opaque else { return -1 }
            return Unmanaged<JournalFile>.fromOpaque(opaque).takeUnretainedValue().seek(offset, whence)
        })
        if io == nil {
            av_free(buffer)
            Foundation.close(fd)
            throw MediaError("out of memory (avio_alloc_context)")
        }
        // The new name must survive a power cut too, not only the bytes under it.
        syncFolder(of: path)
    }

    deinit { close() }

    /// The muxer moves back (to patch a size it now knows): what is pending goes first.
    private func seek(_ offset: Int64, _ whence: Int32) -> Int64 {
        let mode = whence & ~Int32(AVSEEK_FORCE)
        if mode == AVSEEK_SIZE { return max(end, pendingStart + Int64(pending.count)) }
        do { try writePending() } catch { return Int64(avg_averror(EIO)) }
        switch mode {
        case SEEK_SET: pendingStart = offset
        case SEEK_CUR: pendingStart += offset
        case SEEK_END: pendingStart = end + offset
        default: return Int64(avg_averror(EINVAL))
        }
        return pendingStart
    }

    /// Writes what the muxer has completed, in one piece, and marks it as a unit boundary.
    public func commit() throws {
        if let failure { throw failure }
        guard let io else { return }
        avio_flush(io)
        try writePending()
        safeEnd = end
        scheduleSync()
    }

    private func writePending() throws {
        if let failure { throw failure }
        guard !pending.isEmpty else { return }
        _ = Self.writes.wait { s -> Bool? in
            guard !s.writing && !s.exiting else { return nil }
            s.writing = true
            return true
        }
        defer { Self.writes.withLockWakingAll { $0.writing = false } }
        var done = 0
        let total = pending.count
        let error: Int32? = pending.withUnsafeBytes { bytes in
            while done < total {
                let n = pwrite(fd, bytes.baseAddress! + done, total - done, off_t(pendingStart) + off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if n == 0 { return EIO }
                done += n
            }
            return nil
        }
        if let error {
            fail(errno: error)
            throw failure!
        }
        pendingStart += Int64(total)
        end = max(end, pendingStart)
        pending.removeAll(keepingCapacity: true)
    }

    /// Cuts the file back to its last complete unit and remembers why.
    private func fail(errno code: Int32) {
        pending.removeAll()
        ftruncate(fd, off_t(safeEnd))
        end = safeEnd
        pendingStart = safeEnd
        let reason: String
        switch code {
        case ENOSPC: reason = "the disk is full (\(String(cString: strerror(code))))"
        case EDQUOT: reason = "the disk quota is used up (\(String(cString: strerror(code))))"
        case EIO: reason = "an I/O error (\(String(cString: strerror(code))))"
        default: reason = String(cString: strerror(code))
        }
        let kept = safeEnd > 0 ? "cut back to its last complete \(unit) (\(safeEnd) bytes), which plays" : "nothing that plays was written"
        failure = MediaError("cannot write '\(path)': \(reason); \(kept)")
    }

    /// At most two a second: an offline run completes fragments faster than a disk syncs, and
    /// other containers commit every packet. `close` syncs whatever is left.
    private func scheduleSync() {
        let schedule = syncScheduled
        if schedule.scheduled.withLock({ $0 }) || Date().timeIntervalSince(lastSync) < 0.5 { return }
        schedule.scheduled.withLock { $0 = true }
        lastSync = Date()
        let fd = fd
        syncQueue.async {
            schedule.scheduled.withLock { $0 = false }
            fdatasync(fd)
        }
    }

    /// Flushes to the disk and closes the file; what was not committed is dropped.
    public func close() {
        guard !closed else { return }
        closed = true
        syncQueue.sync {}
        if failure == nil { fsync(fd) }
        Foundation.close(fd)
        if let io {
            av_freep(&io.pointee.buffer)
            var p: UnsafeMutablePointer<AVIOContext>? = io
            avio_context_free(&p)
            self.io = nil
        }
    }

    // MARK: finishing by replacing

    /// Runs `write` to fill `temporary`, then puts it in place of `path` in one step (rename),
    /// so the journal stays whole until its replacement is. A forced exit meanwhile removes the
    /// temporary and leaves the journal.
    public static func replace(_ path: String, with temporary: String, _ write: () throws -> Void) throws {
        _ = temporaries.withLock { $0.insert(temporary) }
        defer { _ = temporaries.withLock { $0.remove(temporary) } }
        do {
            try write()
            let fd = open(temporary, O_RDONLY | O_CLOEXEC)
            if fd >= 0 { fsync(fd); Foundation.close(fd) }
            guard rename(temporary, path) == 0 else {
                throw MediaError("cannot move '\(temporary)' to '\(path)': \(String(cString: strerror(errno)))")
            }
            syncFolder(of: path)
        } catch {
            unlink(temporary)
            throw error
        }
    }

    /// For an exit that cannot wait: lets a unit being written finish (up to `timeout`),
    /// then removes half-made replacements. The caller exits right after.
    public static func settleForExit(timeout: TimeInterval = 2) {
        _ = writes.wait(until: Monotonic.now + timeout) { s -> Bool? in
            s.exiting = true
            return s.writing ? nil : true
        }
        temporaries.withLock { for t in $0 { unlink(t) } }
    }
}

private func syncFolder(of path: String) {
    var folder = (path as NSString).deletingLastPathComponent
    if folder.isEmpty { folder = "." }
    let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if fd >= 0 { fsync(fd); close(fd) }
}
