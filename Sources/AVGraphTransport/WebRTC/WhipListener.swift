import AVGraph
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// avgraph as a WHIP endpoint (RFC 9725): the HTTP side on SwiftNIO (`POST /whip/KEY` with an
/// SDP offer, `201 Created` with the answer and the session's `Location`, `PATCH` for trickled
/// candidates, `DELETE` to end, CORS for any origin) and one UDP port for every session's media
/// on a thread of its own: a datagram from a known address goes to its session, an ICE check
/// from a new one to the session its USERNAME names, anything else is dropped and counted. A
/// session that has not connected (ICE and DTLS) within `handshakeTimeout` is released; a
/// connected one silent for `silence` is gone. One publisher at a time, as the RTMP and SRT
/// listeners: a second is refused with 409 while the first publishes.
// @unchecked: a subclass (see PublisherHandoff); the sessions are the UDP thread's alone, what
// the HTTP side hands over goes through `inbox`.
package final class WhipListener: PublisherListener, @unchecked Sendable {
    package struct Settings: Sendable {
        package var host: String
        package var httpPort: Int
        /// The UDP port for media (0: any).
        package var udpPort: Int
        /// Addresses (`HOST` or `HOST:PORT`) to put in the answer's candidates (a server behind NAT:
        /// its public one, and the public port when that differs); empty:
        /// the bound address, or with 0.0.0.0 127.0.0.1 and this machine's other IPv4 addresses.
        package var advertise: [String] = []
        package var keys: PublisherKeys?
        package var handshakeTimeout = 10.0
        package var silence = 5.0
        /// Sessions between their offer and their connection, at most (more: 503).
        package var handshakes = 16
        package var capacity = 8 << 20
        /// Any number of publishers at once (`avgraph serve`), each its own stream; else one (409).
        package var concurrent = false
        /// PEM files: the endpoint over HTTPS (`whips://`), as browsers publish from https pages.
        package var tls: (certificate: String, key: String)?
        package init(host: String, httpPort: Int, udpPort: Int) {
            self.host = host
            self.httpPort = httpPort
            self.udpPort = udpPort
        }
    }

    /// A session made on the HTTP side, crossing to the UDP thread once.
    private struct Handed: @unchecked Sendable { let session: WhipSession }

    private struct Inbox {
        var incoming: [Handed] = []
        var deleted: [String] = []
        /// Sessions alive, by id, and whether each has connected: what the HTTP side admits by.
        var alive: [String: Bool] = [:]
    }

    package let settings: Settings
    package let boundUdpPort: Int
    package private(set) var boundHttpPort = 0
    private let certificate: DtlsCertificate
    private let candidates: [(address: String, port: Int)]
    private let inbox = Mutex(Inbox())
    private let udp: Int32
    private var server: Channel?
    private let tls: NIOSSLContext?
    // The UDP thread's own.
    private var sessions: [String: WhipSession] = [:]
    private var byUfrag: [String: WhipSession] = [:]
    private var byAddress: [UdpPeer: WhipSession] = [:]
    private var replyTo: [String: UdpPeer] = [:]

    package init(_ settings: Settings) throws {
        self.settings = settings
        certificate = try DtlsCertificate()
        let bare = settings.host.hasPrefix("[") ? String(settings.host.dropFirst().dropLast()) : settings.host
        let (fd, port) = try WebRtcUdpSocket.bindUdp(bare, settings.udpPort)
        (udp, boundUdpPort) = (fd, port)
        do {
            candidates = settings.advertise.isEmpty ? WebRtcUdpSocket.localAddresses(bare).map { ($0, port) }
                : try settings.advertise.map { try WebRtcUdpSocket.candidate($0, port: port) }
            if let files = settings.tls {
                do { tls = try ListenTLS.checkedContext(certificate: files.certificate, key: files.key) } catch { throw MediaError(error.description) }
            } else {
                tls = nil
            }
            try super.init(threadName: "whip-media")
        } catch {
            close(fd)
            throw error
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(ChannelOptions.autoRead, value: false)
            .childChannelInitializer { [weak self] channel in
                guard let self else { return channel.close() }
                if let tls = self.tls {
                    do { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) } catch { return channel.close() }
                }
                return channel.pipeline.configureHTTPServerPipeline(withErrorHandling: true).flatMapThrowing {
                    try channel.pipeline.syncOperations.addHandler(WhipHTTPHandler(judgeHead: { [weak self] in self?.judgeHead($0) },
                                                                                   answer: { [weak self] in self?.answer($0) ?? .init(status: .serviceUnavailable) }))
                }
            }
        do { server = try bootstrap.bind(host: bare, port: settings.httpPort).wait() } catch {
            close(udp)
            let why = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            throw MediaError("cannot listen on \(tls == nil ? "whip" : "whips")://\(settings.host):\(settings.httpPort): \(why)")
        }
        boundHttpPort = server?.localAddress?.port ?? settings.httpPort
    }

    deinit {
        if !isStopped { server?.close(promise: nil) }
        close(udp)
    }

    package override func start() {
        server?.setOption(ChannelOptions.autoRead, value: true).whenFailure { [weak self] error in
            self?.note("the WHIP endpoint cannot accept connections: \(error)")
        }
        super.start()
    }

    package override func stop() {
        _ = try? server?.close().wait()
        super.stop()
    }

    // MARK: HTTP (on the event loop)

    /// `/whip/KEY` or `/whip` (the key then only in `Authorization: Bearer`); `/whip/session/ID` a session.
    private enum Target { case endpoint(key: String?), session(String), other }

    private static func target(_ uri: String) -> Target {
        let path = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map { $0.removingPercentEncoding ?? String($0) }
        guard parts.first == "whip" else { return .other }
        if parts.count == 3, parts[1] == "session" { return .session(parts[2]) }
        if parts.count == 1 { return .endpoint(key: nil) }
        return .endpoint(key: parts.dropFirst().joined(separator: "/"))
    }

    private static func bearer(_ headers: HTTPHeaders) -> String? {
        guard let value = headers.first(name: "Authorization"), value.lowercased().hasPrefix("bearer ") else { return nil }
        return String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }

    /// The key a request publishes with (the path's, else the bearer token's), and whether it is admitted.
    private func key(_ request: WhipHTTPHandler.Request, pathKey: String?) -> (key: String, admitted: Bool) {
        let candidates = [pathKey, Self.bearer(request.headers)].compactMap { $0 }.filter { !$0.isEmpty }
        guard let keys = settings.keys else { return (candidates.first ?? "", true) }
        for c in candidates where keys.admits([c]) { return (c, true) }
        return (candidates.first ?? "", false)
    }

    private func judgeHead(_ request: WhipHTTPHandler.Request) -> WhipHTTPHandler.Response? {
        guard case .endpoint(let pathKey) = Self.target(request.path), request.method == .POST else { return nil }
        if !key(request, pathKey: pathKey).admitted {
            note("whip: refused a publisher: no valid key")
            return .init(status: .unauthorized, headers: [("WWW-Authenticate", "Bearer")], body: "no valid key: publish to /whip/KEY or with Authorization: Bearer KEY\n")
        }
        if let type = request.headers.first(name: "Content-Type"), !type.lowercased().hasPrefix("application/sdp") {
            return .init(status: .unsupportedMediaType, body: "the offer is application/sdp, not \(type)\n")
        }
        return nil
    }

    private func answer(_ request: WhipHTTPHandler.Request) -> WhipHTTPHandler.Response {
        switch (Self.target(request.path), request.method) {
        case (_, .OPTIONS): return .init(status: .noContent, headers: [("Accept-Post", "application/sdp")])
        case (.endpoint(let pathKey), .POST): return offer(request, key: key(request, pathKey: pathKey).key)
        case (.session(let id), .DELETE):
            let known = inbox.withLock { inbox in
                guard inbox.alive[id] != nil else { return false }
                inbox.deleted.append(id)
                return true
            }
            if known { poke() }
            return known ? .init(status: .ok) : .init(status: .notFound, body: "no such session\n")
        case (.session(let id), .PATCH):
            // Trickled candidates need no answer from an ICE-lite endpoint: the checks tell the address.
            return inbox.withLock { $0.alive[id] != nil } ? .init(status: .noContent) : .init(status: .notFound, body: "no such session\n")
        case (.endpoint, _), (.session, _): return .init(status: .methodNotAllowed, headers: [("Allow", "POST, PATCH, DELETE, OPTIONS")])
        case (.other, _): return .init(status: .notFound, body: "a WHIP endpoint is /whip/KEY\n")
        }
    }

    private func offer(_ request: WhipHTTPHandler.Request, key: String) -> WhipHTTPHandler.Response {
        let busy = inbox.withLock { inbox -> String? in
            if !settings.concurrent && inbox.alive.values.contains(true) { return "a publisher is already publishing here" }
            if inbox.alive.values.filter({ !$0 }).count >= settings.handshakes { return "too many sessions are connecting" }
            return nil
        }
        if let busy { return .init(status: busy.hasPrefix("a publisher") ? .conflict : .serviceUnavailable, body: busy + "\n") }
        let text = String(decoding: request.body, as: UTF8.self)
        let parsed: SessionDescription
        do { parsed = try SessionDescription.parse(text) } catch {
            return .init(status: .badRequest, body: "the offer is not SDP: \(error)\n")
        }
        let local = WebRtcAnswer.Local(ufrag: WebRtcPortLoop.token(8), password: WebRtcPortLoop.token(24), fingerprint: certificate.fingerprint, candidates: candidates)
        let id = WebRtcPortLoop.token(16)
        do {
            let answer = try WebRtcAnswer(offer: parsed, local: local, sessionID: UInt64.random(in: 1...UInt64(Int64.max)), taking: WhipSession.videoCodecs)
            let session = try WhipSession(id: id, key: key, answer: answer, local: local, certificate: certificate, now: Monotonic.now,
                                          capacity: settings.capacity, announce: { [weak self] in self?.announce($0) }, wake: { [weak self] in self?.poke() })
            inbox.withLock {
                $0.incoming.append(Handed(session: session))
                $0.alive[id] = false
            }
            poke()
            return .init(status: .created, headers: [("Content-Type", "application/sdp"), ("Location", "/whip/session/\(id)")], body: answer.sdp)
        } catch let refusal as WebRtcAnswer.Refusal {
            return .init(status: refusal.status == 406 ? .notAcceptable : .badRequest, body: refusal.description + "\n")
        } catch {
            return .init(status: .internalServerError, body: "\(error)\n")
        }
    }


    // MARK: UDP (the listener's thread)

    package override func run() {
        var port = WebRtcPortLoop(fd: udp)
        var lastTick = 0.0
        while !isStopped {
            if port.wait(wake: wake[0]) { drainWake() }
            adopt()
            var strangers = 0
            port.receiveWaiting { if !receive($0, from: $1) { strangers += 1 } }
            port.countStrangers(strangers)
            let now = Monotonic.now
            if now - lastTick >= 0.01 {
                lastTick = now
                tick(now)
            }
            if let count = port.strangersToSay(now: now) {
                note("whip: dropped \(count) datagrams from addresses in no session (garbage, a stranger, or a session already gone)")
            }
        }
        for session in sessions.values { session.end() }
        sessions.removeAll()
    }

    private func adopt() {
        let (incoming, deleted) = inbox.withLock { inbox in
            defer { inbox.incoming.removeAll(); inbox.deleted.removeAll() }
            return (inbox.incoming, inbox.deleted)
        }
        for handed in incoming {
            sessions[handed.session.id] = handed.session
            byUfrag[handed.session.localUfrag] = handed.session
        }
        for id in deleted { if let s = sessions[id] { release(s, why: nil) } }
    }

    /// Whether the datagram was some session's (false: from a stranger).
    private func receive(_ datagram: [UInt8], from peer: UdpPeer) -> Bool {
        let address = Self.address(peer)
        var session = byAddress[peer]
        if session == nil, let ufrag = WebRtcPortLoop.checkedUfrag(datagram) { session = byUfrag[ufrag] }
        guard let session else { return false }
        let replies = session.receive(datagram, from: address, peerName: peer.description, now: Monotonic.now)
        if byAddress[peer] == nil, session.proves(address) { byAddress[peer] = session }
        if session.address == address { replyTo[session.id] = peer }
        for reply in replies { send(reply, to: peer) }
        return true
    }

    private func tick(_ now: Double) {
        for session in sessions.values {
            if let failure = session.failure { release(session, why: "its handshake failed: \(failure)"); continue }
            if session.isEnded { release(session, why: nil); continue }
            if !session.isConnected, now - session.created > settings.handshakeTimeout {
                release(session, why: "no ICE and DTLS within \(Self.seconds(settings.handshakeTimeout))")
                continue
            }
            if session.isConnected, now - session.lastHeard > settings.silence {
                release(session, why: "silent for \(Self.seconds(settings.silence))")
                continue
            }
            let out = session.tick(now: now)
            if let peer = replyTo[session.id] { for d in out { send(d, to: peer) } }
        }
    }

    private func release(_ session: WhipSession, why: String?) {
        if let why { note("whip: \(replyTo[session.id]?.description ?? "a publisher"): released: \(why)") }
        session.end()
        sessions[session.id] = nil
        byUfrag[session.localUfrag] = nil
        byAddress = byAddress.filter { $0.value !== session }
        replyTo[session.id] = nil
        _ = inbox.withLock { $0.alive.removeValue(forKey: session.id) }
    }

    private func send(_ bytes: [UInt8], to peer: UdpPeer) {
        _ = bytes.withUnsafeBytes { WebRtcPortLoop.send(udp, $0.baseAddress, $0.count, to: peer) }
    }

    package override func announce(_ stream: PublisherStream) {
        inbox.withLock { inbox in
            for (id, connected) in inbox.alive where !connected && sessions[id]?.stream === stream { inbox.alive[id] = true }
        }
        super.announce(stream)
    }

    static func address(_ peer: UdpPeer) -> WebRtcPeer.Address {
        if Int32(peer.family) == AF_INET {
            return .init(host: withUnsafeBytes(of: UInt32(truncatingIfNeeded: peer.low)) { Array($0) }, port: in_port_t(bigEndian: peer.port))
        }
        return .init(host: withUnsafeBytes(of: (peer.high, peer.low)) { Array($0) }, port: in_port_t(bigEndian: peer.port))
    }
}
