import AVGraph
import CSrt
import Foundation

/// The `srt` sink's socket, on libsrt directly: it calls an SRT listener in live mode and sends
/// the muxer's MPEG-TS, one 1316-byte message (7 TS packets) per send. Held by avgraph rather
/// than libavformat's srt protocol so the uplink probe reads its `srt_bstats` on a socket we own.
///
/// Nothing blocks past a cancel or the timeout: the call is asynchronous and waited for in
/// `srt_epoll_wait` slices that look at the cancel flag; a send blocks at most `slice` at a time
/// (SRTO_SNDTIMEO) and fails once the peer acknowledged nothing for the timeout
/// (`checkAcknowledged`); libsrt's own peer-idle check (SRTO_PEERIDLETIMEO) is the backstop.
package final class SrtCaller: MuxerTransport {
    private let socket: SRTSOCKET
    private let cancel: CancelFlag
    private let timeout: Double
    /// Seconds a clean close may wait for the tail to arrive (SRTO_LINGER; 0 in live mode unless set).
    private let lingerSeconds: Double
    private var closed = false
    /// Acknowledgements counted at the last check, and since when what was sent has had none.
    private var acknowledged: Int32 = -1
    private var owedSince = 0.0
    private var lastAckCheck = -Double.infinity
    package static let ackCheck = 0.05

    /// How long one wait lasts before the cancel flag is looked at again.
    package static let slice = 0.1

    /// Connects to `url`'s listener; `timeout` is the sink's unless the URL's `timeout` says
    /// otherwise. Fails with libsrt's reason (the sink's message names the redacted URL).
    package init(_ url: SrtCallerURL, timeout: Double, cancel: CancelFlag) throws {
        self.cancel = cancel
        self.timeout = url.timeout ?? timeout
        lingerSeconds = url.options.reduce(0) { if case .linger(let s) = $1.value { Double(s) } else { $0 } }
        srt_startup()
        // libsrt's own lines go to stderr; what matters is said in avgraph's error.
        srt_setloglevel(2)  // LOG_CRIT
        socket = srt_create_socket()
        guard socket != -1 else {
            // Nothing to close: deinit (which runs, the object being whole) must not clean up twice.
            closed = true
            let reason = Self.lastError()
            srt_cleanup()
            throw MediaError("cannot create an SRT socket: \(reason)")
        }
        do {
            try configure(url)
            try connect(url)
        } catch {
            close(graceful: false)
            throw error
        }
    }

    deinit { close(graceful: false) }

    package var uplinkSocket: UplinkSocket? { closed ? nil : .srt(socket) }

    private static func lastError() -> String { String(cString: srt_getlasterror_str()) }

    private func set(_ flag: SRT_SOCKOPT, _ name: String, _ value: SrtCallerURL.Option.Value) throws {
        let r: Int32
        switch value {
        case .int32(var n): r = srt_setsockflag(socket, flag, &n, Int32(MemoryLayout<Int32>.size))
        case .int64(var n): r = srt_setsockflag(socket, flag, &n, Int32(MemoryLayout<Int64>.size))
        case .string(let s): r = srt_setsockflag(socket, flag, s, Int32(s.utf8.count))
        case .linger(let seconds):
            var l = linger(l_onoff: seconds > 0 ? 1 : 0, l_linger: seconds)
            r = srt_setsockflag(socket, flag, &l, Int32(MemoryLayout<linger>.size))
        }
        // The value is not printed: it may be the passphrase or the stream id.
        guard r == 0 else { throw MediaError("SRT option \(name) refused: \(Self.lastError())") }
    }

    private func configure(_ url: SrtCallerURL) throws {
        // Live first: setting the transmission type resets the options it governs.
        try set(SRTO_TRANSTYPE, "transtype", .int32(Int32(SRTT_LIVE.rawValue)))
        try set(SRTO_PAYLOADSIZE, "payload_size", .int32(SrtCallerURL.payload))
        for option in url.options { try set(option.flag, option.name, option.value) }
        let ms = { (seconds: Double) in Int32(min(Double(Int32.max), (seconds * 1000).rounded())) }
        try set(SRTO_CONNTIMEO, "connect_timeout", .int32(ms(connectTimeout(url))))
        // A peer that says nothing (no ACK, no keepalive) for the timeout breaks the connection.
        try set(SRTO_PEERIDLETIMEO, "timeout", .int32(ms(timeout)))
        try set(SRTO_SNDTIMEO, "send timeout", .int32(ms(Self.slice)))
        // The call proceeds in the background and is waited for below; sends stay blocking (in
        // slices), which is also what lets srt_close linger until the tail is acknowledged.
        try set(SRTO_RCVSYN, "receive mode", .int32(0))
    }

    /// libsrt's own default for a caller (3 s), as libavformat left it, or less with a shorter
    /// timeout: a listener that is not there costs an attempt that long, then the backoff.
    private func connectTimeout(_ url: SrtCallerURL) -> Double { url.connectTimeout ?? min(Self.defaultConnectTimeout, timeout) }
    package static let defaultConnectTimeout = 3.0

    private func connect(_ url: SrtCallerURL) throws {
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(url.host, String(url.port), &hints, &list)
        guard resolved == 0, let first = list else {
            throw MediaError("cannot resolve \(url.host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(list) }
        guard srt_connect(socket, first.pointee.ai_addr, Int32(first.pointee.ai_addrlen)) != -1 else {
            throw MediaError("SRT call failed: \(Self.lastError())")
        }
        let epoll = srt_epoll_create()
        guard epoll >= 0 else { throw MediaError("SRT call failed: \(Self.lastError())") }
        defer { srt_epoll_release(epoll) }
        var events = Int32(SRT_EPOLL_OUT.rawValue | SRT_EPOLL_ERR.rawValue)
        srt_epoll_add_usock(epoll, socket, &events)
        // libsrt gives up after SRTO_CONNTIMEO; this only guards against its never saying so.
        let deadline = Monotonic.now + connectTimeout(url) + 1
        var ready = [SRTSOCKET](repeating: 0, count: 1)
        while true {
            if cancel.isCancelled { throw MediaError("cancelled while calling") }
            var n = Int32(ready.count)
            _ = srt_epoll_wait(epoll, nil, nil, &ready, &n, Int64(Self.slice * 1000), nil, nil, nil, nil)
            switch srt_getsockstate(socket) {
            case SRTS_CONNECTED: return
            case SRTS_CONNECTING, SRTS_OPENED, SRTS_INIT:
                if Monotonic.now > deadline { throw MediaError("SRT call failed: no answer") }
            default:
                throw MediaError("SRT call failed: \(Self.rejection(srt_getrejectreason(socket)))")
            }
        }
    }

    /// libsrt's reason for a failed call; a listener's own codes (1000 and up: an HTTP status
    /// after 1000, as avgraph's listener and access-control listeners give) named by that status.
    package static func rejection(_ code: Int32) -> String {
        guard code >= 1000 else { return String(cString: srt_rejectreason_str(code)).lowercased() }
        let status = code - 1000
        let meaning = [400: "bad request", 401: "unauthorized, the stream id or its key", 403: "forbidden", 404: "not found",
                       405: "the stream id's mode", 409: "conflict, another publisher is live", 503: "unavailable"][status]
        return "refused by the listener (\(status)\(meaning.map { ": " + $0 } ?? ""))"
    }

    package func send(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        let started = Monotonic.now
        try checkAcknowledged(now: started)
        while true {
            if cancel.isCancelled { throw MediaError("cancelled while sending") }
            let sent = srt_sendmsg2(socket, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
            if sent >= 0 { return }
            // The send buffer stayed full for a slice: the peer is not taking what was sent.
            guard srt_getlasterror(nil) == avg_srt_error_async_send() else {
                throw MediaError("SRT connection lost: \(Self.lastError())")
            }
            if Monotonic.now - started >= timeout {
                throw MediaError("the SRT peer took nothing for \(timeout) s")
            }
        }
    }

    /// libsrt breaks a connection only after the peer-idle timeout *and* 16 unanswered keepalive
    /// periods: about 5 s on a short link whatever the timeout (a SIGSTOPped receiver was
    /// noticed after 5.1 s with a 2 s timeout), and its send buffer takes seconds of messages
    /// before a send blocks. A receiver acknowledges what arrives every 10 ms, so messages sent
    /// `timeout` ago with no acknowledgement since mean a peer that takes nothing. Read at most
    /// every `ackCheck` seconds; the count read before a send, whose own acknowledgement comes later.
    private func checkAcknowledged(now: Double) throws {
        guard now - lastAckCheck >= Self.ackCheck else { return }
        lastAckCheck = now
        var stats = SRT_TRACEBSTATS()
        guard srt_bstats(socket, &stats, 0) == 0 else { return }
        if stats.pktRecvACKTotal != acknowledged {
            acknowledged = stats.pktRecvACKTotal
            owedSince = now
        } else if now - owedSince >= timeout {
            throw MediaError("the SRT peer acknowledged nothing for \(timeout) s")
        }
    }

    /// A receiver holds each packet for its latency before handing it on, and srt-live-transmit
    /// or ffmpeg drop what they still hold when the connection closes: closing as soon as the
    /// last message is acknowledged (the linger) lost the last latency of every stream (175 of
    /// 180 pictures with 200 ms). So a clean end first waits out the receiver's latency after
    /// the last message, within the linger; a cancel ends the wait.
    private func waitForDelivery() {
        var latency: Int32 = 0
        var size = Int32(MemoryLayout<Int32>.size)
        guard lingerSeconds > 0, srt_getsockflag(socket, SRTO_PEERLATENCY, &latency, &size) == 0 else { return }
        cancel.wait(seconds: min(lingerSeconds, Double(latency) / 1000 + Self.slice))
    }

    package func close(graceful: Bool) {
        guard !closed else { return }
        closed = true
        if graceful {
            waitForDelivery()
        } else {
            // Broken or cancelled: nothing is waited for.
            var none = linger(l_onoff: 0, l_linger: 0)
            srt_setsockflag(socket, SRTO_LINGER, &none, Int32(MemoryLayout<linger>.size))
        }
        srt_close(socket)
        srt_cleanup()
    }

    /// A session of the `srt` sink: the caller socket, and libavformat's `format` muxer writing
    /// one SRT live message per 1316 bytes into it. `defaults` are the sink's own URL options.
    package static func muxer(url: String, defaults: [String: String], format: String, timeout: Double, cancel: CancelFlag) throws -> NetworkMuxer {
        let caller = try SrtCaller(try SrtCallerURL(url, defaults: defaults), timeout: timeout, cancel: cancel)
        return try NetworkMuxer(transport: caller, url: Redaction.url(url), format: format, packetSize: Int(SrtCallerURL.payload), cancel: cancel)
    }
}
