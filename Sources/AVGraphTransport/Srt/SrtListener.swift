import AVGraph
import CSrt
import Foundation
import Synchronization

/// avgraph as the SRT listener, on libsrt directly (libavformat's listener mode takes whoever
/// calls and cannot look at a caller's stream id): `srt_listen_callback` admits a caller only
/// with a known stream id (when keys are set) and while no other publisher is live; libsrt
/// checks the passphrase. One thread waits in `srt_epoll_wait` on the listener, the admitted
/// caller and the stop pipe; the caller's MPEG-TS goes to the reader as a `PublisherStream`.
// @unchecked: a subclass (see PublisherHandoff); `socket` and `sessions` are the listener thread's
// alone, what libsrt's callback thread shares with it is in `callers`.
package final class SrtListener: PublisherListener, @unchecked Sendable {
    package struct Settings {
        package var host: String
        package var port: Int
        package var passphrase: String?
        package var latency: Double
        /// nil: any stream id (the passphrase is the only check).
        package var keys: PublisherKeys?
        package var handshakeTimeout = 5.0
        package var silence = 5.0
        /// Any number of callers at once (`avgraph serve`), each its own stream.
        package var concurrent = false
        /// Connected callers that have sent nothing yet (see `WaitingRoom`).
        package var waiting = WaitingRoom<SRTSOCKET>.Limits()
        /// Packets may arrive this many later than a missing one before it counts as lost
        /// (`SRTO_LOSSMAXTTL`): bonded links deliver out of order, and each early loss report
        /// would ask for a retransmission of a packet still on its way.
        package var reorderTolerance: Int32 = 0
        /// What a caller's address is shown as (a bonding receiver in front names its sender's link).
        package var peerName: (@Sendable (String) -> String)?

        package init(host: String, port: Int, passphrase: String?, latency: Double, keys: PublisherKeys?, handshakeTimeout: Double = 5.0,
                     silence: Double = 5.0, concurrent: Bool = false, waiting: WaitingRoom<SRTSOCKET>.Limits = .init()) {
            self.host = host
            self.port = port
            self.passphrase = passphrase
            self.latency = latency
            self.keys = keys
            self.handshakeTimeout = handshakeTimeout
            self.silence = silence
            self.concurrent = concurrent
            self.waiting = waiting
        }
    }

    package let settings: Settings
    /// The port bound (the settings' own, or the one the system chose for port 0).
    package private(set) var boundPort = 0
    private var socket: SRTSOCKET
    private let epoll: Int32
    /// Connected callers. One is announced to the reader with its first bytes: a caller that
    /// connects and says nothing holds no run and no source, only a place in `room`.
    private var sessions: [SRTSOCKET: (stream: PublisherStream, lastData: Double, announced: Bool)] = [:]
    private var room: WaitingRoom<SRTSOCKET>
    private var notes = NoteThrottle()
    /// libsrt calls the hook on its own thread.
    private struct Callers {
        var busy = false
        /// Callers whose stream id was admitted, by address, and when: one that has not become a
        /// connection by the handshake timeout failed after the hook (a wrong passphrase).
        var admitted: [String: Double] = [:]
        var lastRefusal: [String: Double] = [:]
    }
    private let callers = Mutex(Callers())
    /// Callers whose connection ended with packets still held for their play time (see `drain`), and until when.
    private var draining: [SRTSOCKET: (stream: PublisherStream, until: Double)] = [:]
    /// How often a draining caller's buffer is read.
    package static let drainPoll = 0.01

    package init(_ settings: Settings) throws {
        self.settings = settings
        room = WaitingRoom(limits: settings.waiting)
        srt_startup()
        // libsrt writes its own lines to stderr (each refused caller, twice): what matters is said here, once.
        srt_setloglevel(2)  // LOG_CRIT
        let s = srt_create_socket(), e = srt_epoll_create()
        socket = s
        epoll = e
        do { try super.init(threadName: "srt-listener") } catch {
            srt_close(s)
            srt_epoll_release(e)
            throw error
        }
        try configure()
    }

    deinit {
        stop()
        for s in sessions.keys { srt_close(s) }
        if socket != -1 { srt_close(socket) }
        srt_epoll_release(epoll)
        srt_cleanup()
    }

    private func fail(_ what: String) -> MediaError {
        MediaError("cannot listen on srt://\(settings.host):\(settings.port): \(what): \(String(cString: srt_getlasterror_str()))")
    }

    private func configure() throws {
        var no: Int32 = 0
        var latency = Int32(settings.latency * 1000)
        srt_setsockflag(socket, SRTO_RCVSYN, &no, Int32(MemoryLayout<Int32>.size))
        srt_setsockflag(socket, SRTO_RCVLATENCY, &latency, Int32(MemoryLayout<Int32>.size))
        if settings.reorderTolerance > 0 {
            var ttl = settings.reorderTolerance
            srt_setsockflag(socket, SRTO_LOSSMAXTTL, &ttl, Int32(MemoryLayout<Int32>.size))
        }
        if let p = settings.passphrase {
            guard srt_setsockflag(socket, SRTO_PASSPHRASE, p, Int32(p.utf8.count)) == 0 else { throw fail("passphrase") }
        }
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(settings.host, String(settings.port), &hints, &list) == 0, let first = list else { throw fail("address") }
        defer { freeaddrinfo(list) }
        guard srt_bind(socket, first.pointee.ai_addr, Int32(first.pointee.ai_addrlen)) == 0 else { throw fail("bind") }
        var bound = sockaddr_storage()
        var boundLength = Int32(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { srt_getsockname(socket, $0, &boundLength) } }
        boundPort = UdpPeer(bound)?.portNumber ?? settings.port
        let hooked = srt_listen_callback(socket, { opaque, caller, _, peer, streamID in
            guard let opaque else { return -1 }
            let me = Unmanaged<SrtListener>.fromOpaque(opaque).takeUnretainedValue()
            let address = peer.map { SrtListener.describe($0) } ?? "unknown"
            return me.admit(caller, peer: me.settings.peerName?(address) ?? address, streamID: streamID.map { String(cString: $0) } ?? "")
        }, Unmanaged.passUnretained(self).toOpaque())
        // Callers whose handshake is done wait here until the listener's thread accepts them.
        guard hooked == 0, srt_listen(socket, 128) == 0 else { throw fail("listen") }
        var events = Int32(SRT_EPOLL_IN.rawValue | SRT_EPOLL_ERR.rawValue)
        srt_epoll_add_usock(epoll, socket, &events)
        srt_epoll_add_ssock(epoll, wake[0], &events)
    }

    private static func describe(_ a: UnsafePointer<sockaddr>) -> String {
        PeerAddress.describe(a, socklen_t(a.pointee.sa_family == sa_family_t(AF_INET6) ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size))
    }

    /// The hook, on libsrt's thread, before the handshake ends: 0 admits, -1 refuses.
    private func admit(_ caller: SRTSOCKET, peer: String, streamID: String) -> Int32 {
        let id = SrtStreamID(streamID)
        var refusal: (reason: String, code: Int32)?
        if !id.publishes {
            refusal = ("refused: the stream id asks to \(id.mode == "request" ? "receive" : "do something else") "
                + "(m=\(SrtStreamID.printable(id.mode ?? ""))); this source takes publishers", avg_srt_reject_bad_mode())
        } else if let keys = settings.keys, !keys.admits(id.candidates) {
            refusal = ("refused: unknown key", avg_srt_reject_unauthorized())
        }
        let concurrent = settings.concurrent
        let repeated = callers.withLock { c in
            if refusal == nil && c.busy && !concurrent { refusal = ("refused: another publisher is live on this source", avg_srt_reject_conflict()) }
            let now = Monotonic.now
            // A refused caller calls again, from a new port each time (GStreamer's srtsink every
            // 100 ms, for ever): one warning for it while it keeps calling.
            let host = "\(peer.lastIndex(of: ":").map { peer[..<$0] } ?? Substring(peer)) \(refusal?.reason ?? "")"
            let repeated = now - (c.lastRefusal[host] ?? -10) < 2
            if refusal != nil {
                if c.lastRefusal.count > 256 { c.lastRefusal = c.lastRefusal.filter { now - $0.value < 2 } }
                c.lastRefusal[host] = now
            } else {
                c.admitted[peer] = now
            }
            return repeated
        }
        guard let refusal else { return 0 }
        if !repeated { note("\(peer)\(id.user.map { " (u=\(SrtStreamID.printable($0)))" } ?? ""): \(refusal.reason)") }
        srt_setrejectreason(caller, refusal.code)
        return -1
    }

    package override func run() {
        var readable = [SRTSOCKET](repeating: 0, count: 4)
        var system = [SYSSOCKET](repeating: 0, count: 2)
        var buffer = [CChar](repeating: 0, count: 1500)
        defer {
            for s in Array(sessions.keys) + Array(draining.keys) { endSession(s) }
            // The port is free once the loop ends, not when the last reference goes.
            srt_close(socket)
            socket = -1
        }
        while !isStopped {
            let wait = nearestDeadline().map { Int64(max(0, $0 - Monotonic.now) * 1000) + 1 } ?? -1
            var rn = Int32(readable.count), sn = Int32(system.count)
            let n = srt_epoll_wait(epoll, &readable, &rn, nil, nil, wait, &system, &sn, nil, nil)
            if isStopped { return }
            if sn > 0 { drainWake() }
            if n > 0 {
                for s in readable.prefix(Int(max(0, rn))) {
                    if s == socket { acceptAll() } else if sessions[s] != nil { receive(s, &buffer) }
                }
            }
            drainEnded()
            checkDeadlines()
        }
    }

    private func acceptAll() {
        while true {
            var addr = sockaddr_storage()
            var len = Int32(MemoryLayout<sockaddr_storage>.size)
            let s = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { srt_accept(socket, $0, &len) } }
            guard s >= 0 else { return }
            let address = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { PeerAddress.describe($0, socklen_t(len)) } }
            let peer = settings.peerName?(address) ?? address
            let concurrent = settings.concurrent
            let taken = callers.withLock { c in
                c.admitted[peer] = nil
                return c.busy && !concurrent
            }
            if taken {
                srt_close(s)
                continue
            }
            var events = Int32(SRT_EPOLL_IN.rawValue | SRT_EPOLL_ERR.rawValue)
            srt_epoll_add_usock(epoll, s, &events)
            let id = SrtStreamID(Self.streamID(of: s))
            let stream = PublisherStream(peer: peer, key: id.resource ?? id.raw, format: "mpegts") { [weak self] in self?.poke() }
            sessions[s] = (stream, Monotonic.now, false)
            for victim in room.enter(s, address: peer) {
                if let more = notes.pass("displaced"), let v = sessions[victim] {
                    note(room.displacedNote(v.stream.peer, waiting: "connected callers have sent nothing") + NoteThrottle.suffix(more))
                }
                endSession(victim)
            }
        }
    }

    /// A caller's first bytes: it is a publisher now (one at a time unless `concurrent`).
    private func announceFirst(_ socket: SRTSOCKET) {
        guard let s = sessions[socket], !s.announced else { return }
        room.leave(socket)
        let concurrent = settings.concurrent
        let taken = callers.withLock { c in
            defer { c.busy = true }
            return c.busy && !concurrent
        }
        if taken {
            note("\(s.stream.peer): refused: another publisher is live on this source")
            endSession(socket)
            return
        }
        sessions[socket]?.announced = true
        announce(s.stream)
    }

    /// The stream id an accepted caller gave (SRTO_STREAMID holds up to 512 bytes).
    private static func streamID(of s: SRTSOCKET) -> String {
        var id = [CChar](repeating: 0, count: 513)
        var length = Int32(512)
        guard srt_getsockflag(s, SRTO_STREAMID, &id, &length) == 0 else { return "" }
        return String(decoding: id.prefix(Int(max(0, min(length, 512)))).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func receive(_ socket: SRTSOCKET, _ buffer: inout [CChar]) {
        guard let current = sessions[socket] else { return }
        var bytes: [UInt8] = []
        while true {
            let n = srt_recvmsg(socket, &buffer, Int32(buffer.count))
            if n > 0 {
                buffer.withUnsafeBytes { bytes += $0.prefix(Int(n)) }
                continue
            }
            if n < 0 && srt_getlasterror(nil) == avg_srt_error_async_receive() { break }
            // Closed or broken: the caller is gone, what it sent perhaps not all read yet.
            if !current.announced {
                // One that never sent a byte was never a publisher.
                guard !bytes.isEmpty else { return endSession(socket) }
                announceFirst(socket)
                guard sessions[socket] != nil else { return }
            }
            current.stream.append(bytes)
            startDraining(socket)
            return
        }
        sessions[socket]?.lastData = Monotonic.now
        if !current.announced && !bytes.isEmpty { announceFirst(socket) }
        guard sessions[socket] != nil else { return }
        // Live SRT keeps no backlog for a late reader: past the stream's bound, what comes is lost either way.
        if !current.stream.isFull { current.stream.append(bytes) }
    }

    /// A caller's connection ended (its close came, or it broke). libsrt still holds the packets
    /// that arrived within the receive latency before: they are handed over only at their play
    /// time, and `srt_recvmsg` on an ended connection gives what is due and otherwise fails.
    /// Ended there, every publisher that closes would lose its last `latency` of media (ffmpeg
    /// over SRT: 177 of 180 pictures with 120 ms; 150 with 1 s). So the buffer is read as its
    /// packets come due, off the epoll (which reports an ended connection at every wait), until
    /// it is empty or the latency has passed.
    private func startDraining(_ socket: SRTSOCKET) {
        guard let s = sessions.removeValue(forKey: socket) else { return }
        srt_epoll_remove_usock(epoll, socket)
        var latency: Int32 = 0
        var size = Int32(MemoryLayout<Int32>.size)
        if srt_getsockflag(socket, SRTO_RCVLATENCY, &latency, &size) != 0 { latency = Int32(settings.latency * 1000) }
        draining[socket] = (s.stream, Monotonic.now + Double(latency) / 1000 + 0.25)
        releaseIfIdle()
        drainEnded()
    }

    /// Reads what has come due on each ended connection; ends a session once nothing is left.
    private func drainEnded() {
        guard !draining.isEmpty else { return }
        var buffer = [CChar](repeating: 0, count: 1500)
        let now = Monotonic.now
        for (socket, d) in draining {
            var bytes: [UInt8] = []
            while !d.stream.isAbandoned {
                let n = srt_recvmsg(socket, &buffer, Int32(buffer.count))
                guard n > 0 else { break }
                buffer.withUnsafeBytes { bytes += $0.prefix(Int(n)) }
            }
            d.stream.append(bytes)
            var held: Int32 = 0
            var size = Int32(MemoryLayout<Int32>.size)
            let empty = srt_getsockflag(socket, SRTO_RCVDATA, &held, &size) != 0 || held <= 0
            if empty || now >= d.until || d.stream.isAbandoned { endSession(socket) }
        }
    }

    private func endSession(_ socket: SRTSOCKET) {
        let stream: PublisherStream
        if let s = sessions.removeValue(forKey: socket) {
            srt_epoll_remove_usock(epoll, socket)
            stream = s.stream
        } else if let d = draining.removeValue(forKey: socket) {
            stream = d.stream
        } else {
            return
        }
        room.leave(socket)
        srt_close(socket)
        stream.end()
        releaseIfIdle()
    }

    /// A draining caller does not hold the source: the next may be admitted (its stream waits for the reader).
    private func releaseIfIdle() {
        let busy = sessions.values.contains { $0.announced }
        callers.withLock { $0.busy = busy }
    }

    private func nearestDeadline() -> Double? {
        let oldest = callers.withLock { $0.admitted.values.min() }
        let candidates = [oldest.map { $0 + settings.handshakeTimeout }, sessions.values.map(\.lastData).min().map { $0 + min(settings.silence, settings.handshakeTimeout) },
                          draining.isEmpty ? nil : Monotonic.now + Self.drainPoll].compactMap { $0 }
        return candidates.min()
    }

    private func checkDeadlines() {
        let now = Monotonic.now
        for (socket, s) in sessions where !s.announced && now - s.lastData >= settings.handshakeTimeout {
            if let more = notes.pass("timeout") {
                note("\(s.stream.peer): refused: connected and sent nothing for \(Self.seconds(settings.handshakeTimeout))" + NoteThrottle.suffix(more))
            }
            endSession(socket)
        }
        for (socket, s) in sessions where s.announced && (s.stream.isAbandoned || now - s.lastData >= settings.silence) {
            if !s.stream.isAbandoned { note("\(s.stream.peer): the publisher sent nothing for \(Self.seconds(settings.silence)): taken as gone") }
            endSession(socket)
        }
        let timeout = settings.handshakeTimeout
        let failed = callers.withLock { c in
            let failed = c.admitted.filter { now - $0.value >= timeout }.map(\.key)
            for peer in failed { c.admitted[peer] = nil }
            return failed
        }
        for peer in failed.sorted() {
            note("\(peer): refused: the SRT handshake did not complete (a wrong passphrase?)")
        }
    }
}
